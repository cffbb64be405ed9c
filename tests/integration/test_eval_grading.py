"""The lenient judge (`--judge openai`) through the real openai backend against a loopback
OpenAI-compatible server: it decides answers that do not match strictly, is skipped for those
that do, its tokens are counted apart, and an unusable reply falls back to token recall."""
from __future__ import annotations

import json

import pytest
from helpers.openai_server import LoopbackOpenAIServer
from helpers.questions import ANSWERABLE

from pagerag.errors import ConfigError
from pagerag.evaluate.formats import QAItem
from pagerag.evaluate.grading import make_judge
from pagerag.evaluate.scoring import score_answer
from pagerag.settings import LLMSettings

# Novel-10146-a02 of the training set, with two of its gold answers
ITEM = QAItem("q", ANSWERABLE, True, ["$4,000", "4,000 dollars in gold"], [], "fact", "Novel-10146")


def settings(server) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, model="loopback-model", timeout_s=5.0, max_retries=0, cache=False)


def grader(body: dict) -> str:
    """Accepts answers that mention 'gold' (a stand-in for a model's judgement)."""
    prompt = body["messages"][-1]["content"]
    candidate = prompt.split("<<<", 1)[1].split(">>>", 1)[0]
    return json.dumps({"correct": "gold" in candidate, "why": "compared with the gold"})


def test_judge_decides_non_strict_answers_and_counts_its_tokens():
    with LoopbackOpenAIServer(reply=grader) as server:
        judge = make_judge("openai", settings(server))
        paraphrase = score_answer(ITEM, "answered", "Four thousand dollars, all of it in gold coin [1].", [], judge)
        wrong = score_answer(ITEM, "answered", "He carried a silver watch [1].", [], judge)
        strict = score_answer(ITEM, "answered", "A bag with $4,000 in it [1].", [], judge)
        prompts = [b["messages"][-1]["content"] for b in server.bodies]
    assert paraphrase.lenient and not paraphrase.strict and paraphrase.lenient_method == "judge:openai:loopback-model"
    assert not wrong.lenient and wrong.lenient_method.startswith("judge:")
    assert strict.lenient and strict.lenient_method == "strict"  # no judge call for a strict match
    assert len(prompts) == 2 and "$4,000 | 4,000 dollars in gold" in prompts[0]
    assert ITEM.question in prompts[0] and "[1]" not in prompts[0]
    assert judge.prompt_tokens > 0 and judge.completion_tokens > 0


def test_unusable_judge_reply_falls_back_to_token_recall():
    with LoopbackOpenAIServer(reply=lambda body: "I think it is fine.") as server:
        judge = make_judge("openai", settings(server))
        score = score_answer(ITEM, "answered", "dollars in gold, a bagful", [], judge)
    assert score.lenient_method == "token-recall (judge failed)" and score.lenient  # recall 2/3 >= 0.5
    assert not score.strict
    assert judge.failures and "JSON" in judge.failures[0]


def test_unknown_judge_backend_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown --judge"):
        make_judge("gpt", LLMSettings())
    assert make_judge(None, LLMSettings()) is None
