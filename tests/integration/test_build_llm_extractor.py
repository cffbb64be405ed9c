"""`--extractor llm` end to end against a real loopback OpenAI-compatible server: the graph comes
from the LLM's JSON, build tokens are counted, and a rebuild pays no token twice."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.openai_server import LoopbackOpenAIServer
from pagerag.errors import ConfigError
from pagerag.settings import load_settings

pytestmark = pytest.mark.slow

TEXT = (
    "Scrooge signed the register of Marley's burial. Bob Cratchit was Scrooge's clerk.\n\n"
    "Fred, Scrooge's nephew, came to wish him a merry Christmas. Scrooge refused the invitation.\n"
)


def extraction_reply(body: dict) -> str:
    passage = body["messages"][-1]["content"]
    names = sorted(set(re.findall(r"\b(Scrooge|Marley|Bob Cratchit|Fred)\b", passage.split("<<<", 1)[-1])))
    entities = [{"name": n, "type": "PERSON", "description": f"{n} in the passage"} for n in names]
    relations = [{"source": names[0], "target": n, "label": "knows"} for n in names[1:]]
    return json.dumps({"entities": entities, "relations": relations})


def test_llm_extractor_builds_graph_and_caches(tmp_path: Path, monkeypatch):
    from pagerag.build import build_repository
    from pagerag.repository import Repository

    book = tmp_path / "book.txt"
    book.write_text(TEXT)
    monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path / "cache"))
    with LoopbackOpenAIServer(reply=extraction_reply) as server:
        overrides = {"extract": {"extractor": "llm"},
                     "llm": {"backend": "openai", "base_url": server.base_url, "max_retries": 0, "model": "m"}}
        settings = load_settings(environ={}, overrides=overrides)
        report = build_repository([book], tmp_path / "r.rag", settings, show_progress=False)
        calls = server.counts["/v1/chat/completions"]
        assert calls >= 1
        stats = report.manifest["stats"]
        assert stats["build_tokens"] > 0
        names = {e.name for e in Repository.open(tmp_path / "r.rag").graph("raw").entities}
        assert {"Scrooge", "Marley"} <= names
        # a rebuild of a fresh repository path: responses come from the on-disk LLM cache
        build_repository([book], tmp_path / "r2.rag", settings, show_progress=False)
        assert server.counts["/v1/chat/completions"] == calls


def test_llm_extractor_without_llm_fails_before_work(tmp_path: Path):
    from pagerag.build import build_repository

    book = tmp_path / "book.txt"
    book.write_text(TEXT)
    settings = load_settings(environ={}, overrides={"extract": {"extractor": "llm"}, "llm": {"backend": "auto"}})
    with pytest.raises(ConfigError, match="needs an LLM"):
        build_repository([book], tmp_path / "r.rag", settings, show_progress=False)
    assert not (tmp_path / "r.rag").exists()
