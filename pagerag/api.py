"""The Python API.

    from pagerag.api import PageRAG
    rag = PageRAG("carol.rag")                       # pipeline "full", LLM chosen by `auto`
    answer = rag.ask("How much does Scrooge pay his clerk?")
    print(answer.decision, answer.answer, [c.quote for c in answer.citations])
    print(answer.to_dict())                          # the `pagerag ask --json` object

    PageRAG("carol.rag", pipeline="passages-only", llm="extractive",
            generate={"judge_threshold": 0.6}, retrieve={"budget_tokens": 1500})

Keyword overrides are settings sections given as dicts (`generate={...}`, `llm={...}`), and
`llm="openai"` is a shortcut for `llm={"backend": "openai"}`. The repository, the embedding model and the LLM are loaded once
per PageRAG object (the LLM lazily, on the first question that needs it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import ConfigError, InputError
from .settings import Settings, load_settings


def _overrides(llm: str | dict | None, sections: dict[str, Any]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for name, values in sections.items():
        if name not in Settings.model_fields:
            raise ConfigError(f"unknown settings section '{name}' (sections: {', '.join(Settings.model_fields)})")
        if not isinstance(values, dict):
            raise ConfigError(f"settings section '{name}' must be given as a dict, e.g. {name}={{...}}")
        overrides[name] = dict(values)
    if isinstance(llm, dict):
        overrides["llm"] = dict(llm)
    elif llm is not None:
        overrides["llm"] = {"backend": llm}
    return overrides


class PageRAG:
    def __init__(self, repo: str | Path, pipeline: str | None = None, *, settings: Settings | None = None,
                 llm: str | dict | None = None, **sections: Any) -> None:
        from .retrieve.state import get_state

        if settings is not None and (pipeline or llm or sections):
            raise ConfigError("give either settings= or pipeline/llm/section overrides, not both")
        self.settings = settings or load_settings(pipeline=pipeline, overrides=_overrides(llm, sections))
        self.state = get_state(repo)
        self._encode = None
        self._llm: Any = None
        self._llm_loaded = False

    @property
    def encode(self):
        if self._encode is None:
            from .retrieve.api import get_encoder

            self._encode = get_encoder(self.settings)
        return self._encode

    @property
    def llm(self):
        """The LLM (None = extractive), built on first use and kept."""
        if not self._llm_loaded:
            from .generate.llm import get_llm

            self._llm = get_llm(self.settings.llm)
            self._llm_loaded = True
        return self._llm

    def close(self) -> None:
        """Forget this repository version's cached state (a server retiring an old version)."""
        from .retrieve.state import forget_state

        forget_state(self.state.path)

    def retrieve(self, question: str):
        """The evidence for `question` (a pagerag.retrieve.records.Retrieval), without deciding."""
        from .retrieve.api import retrieve

        return retrieve(_check(question), self.state, self.settings, encode=self.encode)

    def ask(self, question: str):
        """Answer with citations, or refuse with a reason (a pagerag.generate.records.Answer)."""
        from .generate.decide import Session, ask

        return ask(_check(question), Session(self.settings, self.state, self.encode, self.llm))


def _check(question: Any) -> str:
    if not isinstance(question, str):
        raise InputError(f"the question must be text, got {type(question).__name__}")
    if not question.strip():
        raise InputError("the question is empty")
    return question
