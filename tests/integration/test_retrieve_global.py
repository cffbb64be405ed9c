"""Global search: the map-reduce over community summaries through a real loopback
OpenAI-compatible server — key points cite their communities' passages, stay under their token
budget, and reach the answerer as graph context beside the excerpts."""
from __future__ import annotations

import json

import pytest
from ask_helpers import loopback_llm, permissive_gate
from helpers.openai_server import LoopbackOpenAIServer

from pagerag.llm import get_llm
from pagerag.records import Hint, StageCost
from pagerag.retrieve.api import get_encoder, retrieve
from pagerag.retrieve.global_search import global_search, map_batches, reduce_points
from pagerag.settings import LLMSettings, load_settings

GLOBAL = "What are the main themes of the story as a whole?"


def _hints(n: int) -> list[Hint]:
    return [Hint("community", f"Group {i}: " + "word " * 40, 0.5 - i / 100, [f"p{i}a", f"p{i}b"]) for i in range(n)]


def test_map_batches_respect_the_token_limit_and_the_call_limit():
    batches = map_batches(_hints(6), limit_tokens=120, max_calls=2, encoding="cl100k_base")
    assert len(batches) == 2 and batches[0] == [0, 1] and batches[1] == [2, 3]
    assert map_batches(_hints(6), limit_tokens=10_000, max_calls=1, encoding="cl100k_base") == [[0, 1, 2, 3, 4, 5]]


def test_reduce_keeps_the_most_important_points_within_budget():
    points = [Hint("point", "Greed gives way to charity.", 0.9, ["a"]), Hint("point", "greed gives way to charity.", 0.8, ["b"]),
              Hint("point", "The weather is cold.", 0.2, ["c"]), Hint("point", "Memory shapes the man.", 0.7, ["d"])]
    kept = reduce_points(points, limit_tokens=13, encoding="cl100k_base")
    assert [p.text for p in kept] == ["Greed gives way to charity.", "Memory shapes the man."]


def _map_reply(body: dict) -> str:
    prompt = body["messages"][-1]["content"]
    assert "Summaries of parts of the book" in prompt and GLOBAL in prompt
    return json.dumps({"points": [
        {"point": "Scrooge's greed is set against Christmas charity.", "summaries": [1, 2], "score": 90},
        {"point": "An uncited point.", "summaries": [], "score": 80},
        {"point": "Irrelevant.", "summaries": [1], "score": 0},
        {"point": "A point citing a summary that was not shown.", "summaries": [99], "score": 70}]})


def test_points_cite_the_passages_of_the_summaries_they_name():
    hints = _hints(3)
    with LoopbackOpenAIServer(reply=_map_reply) as server:
        llm = get_llm(LLMSettings(**loopback_llm(server)))
        cost = StageCost()
        points, notes = global_search(GLOBAL, hints, llm, cost, map_tokens=1000, map_calls=1, points_tokens=200)
        assert server.counts["/v1/chat/completions"] == 1
    assert [p.text for p in points] == ["Scrooge's greed is set against Christmas charity."]
    assert points[0].kind == "point" and points[0].score == 0.9
    assert points[0].passage_ids == ["p0a", "p0b", "p1a", "p1b"]
    assert cost.prompt_tokens > 0 and not notes


def test_a_failed_map_call_is_a_note_not_a_failure():
    with LoopbackOpenAIServer(reply=lambda body: "not json at all") as server:
        llm = get_llm(LLMSettings(**loopback_llm(server)))
        points, notes = global_search(GLOBAL, _hints(2), llm, StageCost(), map_tokens=1000, map_calls=1, points_tokens=200)
    assert points == [] and notes and "global map call failed" in notes[0]


@pytest.fixture(scope="module")
def encode():
    return get_encoder(load_settings(environ={}))


def test_a_global_question_with_an_llm_gets_key_points_drawn_from_opened_communities(carol_repo, encode):
    settings = load_settings(environ={})
    with LoopbackOpenAIServer(reply=_map_reply) as server:
        llm = get_llm(LLMSettings(**loopback_llm(server)))
        r = retrieve(GLOBAL, carol_repo, settings, encode=encode, llm=llm)
        calls = server.counts["/v1/chat/completions"]
    assert r.analysis.need == "global" and calls == 1
    communities = [h for h in r.hints if h.kind == "community"]
    points = [h for h in r.hints if h.kind == "point"]
    assert len(communities) >= 2 and points
    opened = {p for h in communities[:2] for p in h.passage_ids}
    assert set(points[0].passage_ids) == opened
    assert r.llm_cost.prompt_tokens > 0 and "global" in r.timings_ms
    off = settings.model_copy(update={"retrieve": settings.retrieve.model_copy(update={"global_search": "off"})})
    with LoopbackOpenAIServer(reply=_map_reply) as server:
        quiet = retrieve(GLOBAL, carol_repo, off, encode=encode, llm=get_llm(LLMSettings(**loopback_llm(server))))
        assert server.counts["/v1/chat/completions"] == 0
    assert not [h for h in quiet.hints if h.kind == "point"]


def test_the_answerer_reads_the_graph_context_beside_the_excerpts(carol_repo, tmp_path):
    from pagerag.api import PageRAG

    seen = []

    def reply(body):
        prompt = body["messages"][-1]["content"]
        seen.append(prompt)
        if "Summaries of parts of the book" in prompt:
            return _map_reply(body)
        if body.get("logprobs"):
            return "Yes"  # the yes/no sufficiency prompt (its P(yes) from the top log-probabilities)
        return "Greed and charity [1]."

    with LoopbackOpenAIServer(reply=reply, top_logprobs={"Yes": -0.05, "No": -3.0}) as server:
        PageRAG(carol_repo, llm=loopback_llm(server), confidence=permissive_gate(tmp_path),
                generate={"target_cwar": 0.99, "judge": "model"}).ask(GLOBAL)  # a lax threshold: the prompts are tested
    judged = [p for p in seen if "Is the answer to the question written in this excerpt" in p]
    answered = [p for p in seen if "Answer the question using only the excerpts" in p]
    # judge = model: the reader's model decides and the LLM answers over the numbered excerpts with
    # the graph context beside them (the window judge reads one passage at a time, without it)
    assert answered and not judged
    assert "Graph context" in answered[-1]
    for shown in [answered[-1]]:
        assert shown.index("Excerpts from the book") < shown.index("Graph context") < shown.index("Question:")
        block = shown.split("Graph context", 1)[1].split(">>>", 1)[0]
        items = [line for line in block.splitlines() if line.startswith("- ")]
        assert items and all("(from [" in line for line in items)
