"""`pagerag mcp` through the `mcp` client over stdio: the tools an agent sees, an answer with
its citations, a refusal with its reason, and a bad call reported as a tool error."""
from __future__ import annotations

import json
import os
import sys

import anyio
from serving import ANSWER, ANSWERABLE, EXCERPT_DOC, EXCERPT_FILE, UNANSWERABLE, UNANSWERABLE_SUBJECT


def test_agent_asks_and_retrieves_over_stdio(printer_repo):
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                   args=["-m", "pagerag", "mcp", "--repo", str(printer_repo), "--llm", "extractive"])
    results = {}

    async def session():
        with anyio.fail_after(300):
            await talk()

    async def talk():
        async with Client(params, read_timeout_seconds=240) as client:
            results["tools"] = {tool.name: tool for tool in (await client.list_tools()).tools}
            results["answer"] = await client.call_tool("ask", {"question": ANSWERABLE})
            results["closest"] = await client.call_tool("ask", {"question": UNANSWERABLE, "repo": "printer"})
            results["refusal"] = await client.call_tool("ask", {"question": UNANSWERABLE, "repo": "printer",
                                                                "pipeline": "reader-decides"})
            results["evidence"] = await client.call_tool("retrieve", {"question": ANSWERABLE})
            results["unknown"] = await client.call_tool("ask", {"question": ANSWERABLE, "repo": "nope"})
            results["repos"] = await client.call_tool("repos", {})

    anyio.run(session)

    tools = results["tools"]
    assert {"ask", "retrieve", "repos"} <= set(tools)
    assert "question" in tools["ask"].input_schema["properties"]
    answer = results["answer"]
    assert not answer.is_error
    data = answer.structured_content
    assert data["decision"] == "answered" and ANSWER in data["answer"]
    assert data["citations"][0]["file"] == EXCERPT_FILE and data["repo"] == "printer"  # the repository's folder name
    assert data["citations"][0]["doc_id"] == EXCERPT_DOC
    for result in results.values():  # a document's name, never a path on the server's disk
        if hasattr(result, "content"):
            text = json.dumps(result.structured_content) + " ".join(getattr(c, "text", "") for c in result.content)
            assert str(printer_repo.parent) not in text and f"/{EXCERPT_FILE}" not in text
    assert json.loads(answer.content[0].text)["decision"] == "answered"  # the same object as text
    closest = results["closest"].structured_content  # offline: labelled, neither claimed nor refused
    assert closest["decision"] == "answered" and closest["label"] == "closest_passage" and closest["citations"]
    refusal = results["refusal"].structured_content
    assert refusal["decision"] == "refused" and refusal["reason"] == "insufficient_evidence"
    assert UNANSWERABLE_SUBJECT in refusal["answer"]
    evidence = results["evidence"].structured_content
    assert any(ANSWER in e["text"] for e in evidence["evidence"])
    unknown = results["unknown"]
    assert unknown.is_error and "no repository named 'nope'" in unknown.content[0].text
    assert results["repos"].structured_content["repos"][0]["name"] == "printer"
