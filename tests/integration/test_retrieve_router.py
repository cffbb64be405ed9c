"""The LLM router (prompts/route_query) against a real loopback OpenAI-compatible server."""
from __future__ import annotations

import json

from pagerag.api import PageRAG
from pagerag.retrieve.api import get_encoder, retrieve
from pagerag.settings import load_settings
from tests.helpers.openai_server import LoopbackOpenAIServer

QUESTION = "What did Mr. Moore bring down from the capitol?"  # about printer_repo's excerpt


def _settings(server):
    llm = {"backend": "openai", "base_url": server.base_url, "model": "loopback-model", "timeout_s": 10.0,
           "max_retries": 0, "cache": False}
    return load_settings(environ={}, overrides={"retrieve": {"router": "llm"}, "llm": llm})


def test_llm_decides_the_need_and_sees_the_prompt(printer_repo):
    reply = json.dumps({"need": "global", "reason": "asks about the whole book"})
    with LoopbackOpenAIServer(reply=lambda body: reply) as server:
        settings = _settings(server)
        r = PageRAG(printer_repo, settings=settings).retrieve(QUESTION)
        prompt = server.bodies[0]["messages"][-1]["content"]  # the router's (a global map call may follow)
    assert r.analysis.decided_by == "llm" and r.analysis.need == "global"
    assert r.analysis.reason == "asks about the whole book"
    assert QUESTION in prompt and "multi-hop" in prompt
    assert r.plan.need == "global" and "community" in r.plan.operators


def test_a_bad_llm_reply_falls_back_to_the_classifier(printer_repo):
    with LoopbackOpenAIServer(reply=lambda body: '{"need": "sideways"}') as server:
        r = PageRAG(printer_repo, settings=_settings(server)).retrieve(QUESTION)
    assert r.analysis.decided_by == "classifier"
    assert any("LLM router failed" in note for note in r.analysis.notes)
    assert r.evidence


def test_router_uses_the_sessions_llm_and_its_tokens_are_counted(printer_repo):
    reply = json.dumps({"need": "local", "reason": "one fact"})
    with LoopbackOpenAIServer(reply=lambda body: reply) as server:
        rag = PageRAG(printer_repo, settings=_settings(server))
        first = rag.retrieve(QUESTION)
        llm = rag.llm
        second = rag.retrieve("Who was Dr. Foster?")
        assert rag.llm is llm  # one client per session, not one per question
        routed = [b for b in server.bodies if "multi-hop" in b["messages"][-1]["content"]]
    assert len(routed) == 2 and first.analysis.decided_by == second.analysis.decided_by == "llm"
    for r in (first, second):
        assert r.llm_cost.prompt_tokens > 0 and r.to_dict()["tokens"]["prompt"] == r.llm_cost.prompt_tokens


def test_no_llm_configured_leaves_the_classifier_deciding(printer_repo):
    settings = load_settings(environ={}, overrides={"retrieve": {"router": "llm"}})
    r = retrieve(QUESTION, printer_repo, settings, encode=get_encoder(settings))
    assert r.analysis.decided_by == "classifier"
    assert any("no LLM is configured" in note for note in r.analysis.notes)
