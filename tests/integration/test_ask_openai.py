"""The full policy with the `openai` backend against a real loopback HTTP server: the yes/no
log-probability judge, the JSON judge (when the server rejects logprobs), cited answers, the
citation checks that refuse `unsupported_answer`, and the tokens/latency each stage records."""
from __future__ import annotations

import json

import pytest
from ask_helpers import loopback_llm, permissive_gate
from helpers.openai_server import LoopbackOpenAIServer

from pagerag.api import PageRAG
from pagerag.llm import count_message_tokens
from pagerag.records import INSUFFICIENT, UNSUPPORTED

QUESTION = "How much does Scrooge say his clerk earns per week?"
YES = {"Yes": -0.1, "No": -2.4}
NO = {"No": -0.05, "Yes": -3.2}


def kind_of(body: dict) -> str:
    if body.get("logprobs"):
        return "yesno"
    if body.get("response_format"):
        return "json"
    return "answer"


def replies(answer: str = "He earns fifteen shillings a week [1].", verdict: dict | None = None):
    verdict = verdict or {"sufficient": True, "missing": ""}
    return lambda body: {"yesno": "Yes", "json": json.dumps(verdict), "answer": answer}[kind_of(body)]


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    return permissive_gate(tmp_path_factory.mktemp("rcs"))


def ask(carol_repo, gate, server, question=QUESTION, **sections):
    return PageRAG(carol_repo, llm=loopback_llm(server), confidence=gate, **sections).ask(question)


def test_logprob_judge_then_cited_answer(carol_repo, gate):
    with LoopbackOpenAIServer(reply=replies(), top_logprobs=YES) as server:
        answer = ask(carol_repo, gate, server)
        bodies = list(server.bodies)
    assert [kind_of(b) for b in bodies] == ["yesno", "answer"]
    assert answer.decision == "answered" and answer.answer == "He earns fifteen shillings a week [1]."
    assert answer.verdict.method == "logprob" and answer.verdict.score == pytest.approx(0.9, abs=0.05)
    assert answer.citations[0].n == 1 and answer.backend == "openai"
    # the excerpts the model saw are fenced, numbered, and [1] is the one cited
    user = bodies[1]["messages"][1]["content"]
    assert "<<<\n[1] " in user and "\n>>>" in user
    assert " ".join(answer.citations[0].quote.split()) in user
    # tokens come from the server's usage (its word counts), latency from the calls
    assert answer.tokens["judge"]["prompt"] > 0 and answer.tokens["answer"]["completion"] == 7
    assert answer.latency_ms["judge"] > 0 and answer.latency_ms["answer"] > 0
    # prompt size per question stays within the budget (tiktoken, both calls)
    assert sum(count_message_tokens(b["messages"]) for b in bodies) <= 2000


def test_logprob_judge_saying_no_refuses(carol_repo, gate):
    with LoopbackOpenAIServer(reply=replies(), top_logprobs=NO) as server:
        answer = ask(carol_repo, gate, server)
        calls = len(server.bodies)
    assert answer.decision == "refused" and answer.reason == INSUFFICIENT
    assert answer.verdict.score < 0.1 and "P(yes)" in answer.answer
    assert calls == 1  # no answer was composed


def test_json_judge_when_the_server_rejects_logprobs(carol_repo, gate):
    verdict = {"sufficient": False, "missing": "the clerk's weekly wage is not stated"}
    with LoopbackOpenAIServer(reply=replies(verdict=verdict), mode="reject_logprobs") as server:
        answer = ask(carol_repo, gate, server)
        kinds = [kind_of(b) for b in server.bodies]
    assert kinds == ["yesno", "json"]  # tried log-probabilities, fell back to the JSON verdict
    assert answer.reason == INSUFFICIENT and answer.verdict.method == "json"
    assert "weekly wage is not stated" in answer.answer


def test_json_judge_configured_explicitly_and_malformed_verdicts(carol_repo, gate):
    with LoopbackOpenAIServer(reply=replies()) as server:
        answer = ask(carol_repo, gate, server, generate={"judge": "json"})
        assert [kind_of(b) for b in server.bodies] == ["json", "answer"]
    assert answer.decision == "answered" and answer.verdict.method == "json"
    # a judge reply that is no verdict refuses (the judge did not say the evidence suffices)
    for reply in ("I think so, yes", '{"sufficient": "maybe"}'):
        with LoopbackOpenAIServer(reply=lambda body, reply=reply: reply) as server:
            answer = ask(carol_repo, gate, server, generate={"judge": "json"})
        assert answer.decision == "refused" and answer.reason == INSUFFICIENT, reply
        assert answer.verdict.method == "json" and "could not be read" in answer.verdict.missing


def test_answer_without_a_valid_citation_is_refused(carol_repo, gate):
    for text in ("He earns fifteen shillings a week.", "He earns fifteen shillings a week [9]."):
        with LoopbackOpenAIServer(reply=replies(answer=text), top_logprobs=YES) as server:
            answer = ask(carol_repo, gate, server, generate={"attribute_uncited": False})
        assert answer.decision == "refused" and answer.reason == UNSUPPORTED, text
        assert answer.citations == []


def test_uncited_answer_is_cited_only_when_an_excerpt_bears_it_out(carol_repo, gate):
    with LoopbackOpenAIServer(reply=replies(answer="He earns fifteen shillings a week."), top_logprobs=YES) as server:
        answer = ask(carol_repo, gate, server)
    assert answer.decision == "answered" and answer.answer.endswith(f"[{answer.citations[0].n}]")
    assert "fifteen shillings" in answer.citations[0].quote and any("bears it out" in n for n in answer.notes)
    with LoopbackOpenAIServer(reply=replies(answer="The ship left Bristol at dawn."), top_logprobs=YES) as server:
        answer = ask(carol_repo, gate, server)
    assert answer.reason == UNSUPPORTED


def test_invalid_citation_marks_are_removed_and_noted(carol_repo, gate):
    with LoopbackOpenAIServer(reply=replies(answer="Fifteen shillings [1][9]."), top_logprobs=YES) as server:
        answer = ask(carol_repo, gate, server)
    assert answer.decision == "answered" and answer.answer == "Fifteen shillings [1]."
    assert [c.n for c in answer.citations] == [1]
    assert any("[9]" in note for note in answer.notes)


def test_answer_the_cited_excerpts_do_not_bear_out_is_refused(carol_repo, gate):
    with LoopbackOpenAIServer(reply=replies(answer="The ship left Bristol at dawn [1]."), top_logprobs=YES) as server:
        answer = ask(carol_repo, gate, server)
    assert answer.decision == "refused" and answer.reason == UNSUPPORTED
    assert "not borne out" in answer.answer


def test_answerer_may_still_abstain(carol_repo, gate):
    with LoopbackOpenAIServer(reply=replies(answer="INSUFFICIENT"), top_logprobs=YES) as server:
        answer = ask(carol_repo, gate, server)
    assert answer.reason == INSUFFICIENT and "answerer" in answer.answer


def test_type_check_refuses_before_any_llm_call(carol_repo, gate):
    with LoopbackOpenAIServer(reply=replies(), top_logprobs=YES) as server:
        answer = ask(carol_repo, gate, server, question="What is Fred's surname?")
        calls = len(server.bodies)
    assert calls == 0 and answer.reason == INSUFFICIENT and answer.verdict.method == "type-check"
    with LoopbackOpenAIServer(reply=replies(), top_logprobs=YES) as server:
        answer = ask(carol_repo, gate, server, question="What is Fred's surname?", generate={"judge_type_check": False})
        assert len(server.bodies) == 2  # without the check the (agreeable) model is asked


def echo_first_excerpt(body: dict) -> str:
    """An answer made of the first excerpt's opening words, cited: supported by construction."""
    user = body["messages"][-1]["content"]
    return " ".join(user.split("[1] ", 1)[1].split()[:8]) + " [1]."


def test_ablation_prompt_offers_no_way_out(carol_repo, gate):
    with LoopbackOpenAIServer(reply=echo_first_excerpt) as server:
        answer = PageRAG(carol_repo, pipeline="no-evidence-constraint", llm=loopback_llm(server),
                         confidence=gate).ask("What is Fred's surname?")
        bodies = list(server.bodies)
    assert [kind_of(b) for b in bodies] == ["answer"]
    assert "INSUFFICIENT" not in bodies[0]["messages"][1]["content"]
    assert answer.decision == "answered" and answer.verdict.method == "skipped"
    assert answer.citations[0].n == 1
