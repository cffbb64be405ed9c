"""The Python API.

    from pagerag.api import PageRAG
    rag = PageRAG("carol.rag")                       # pipeline "full", LLM chosen by `auto`
    answer = rag.ask("How much does Scrooge pay his clerk?")
    print(answer.decision, answer.answer, [c.quote for c in answer.citations])
    print(answer.to_dict())                          # the `pagerag ask --json` object

    PageRAG("carol.rag", pipeline="passages-only", llm="extractive",
            generate={"target_cwar": 0.1}, retrieve={"budget_tokens": 1500})

Keyword overrides are settings sections given as dicts (`generate={...}`, `llm={...}`), and
`llm="openai"` is a shortcut for `llm={"backend": "openai"}`. The repository, the embedding model and the LLM are loaded once
per PageRAG object (the LLM lazily, on the first question that needs it).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import ConfigError, InputError
from .settings import Settings, load_settings


class PageRAG:
    def __init__(self, repo: str | Path, pipeline: str | None = None, *, settings: Settings | None = None,
                 llm: str | dict | None = None, **sections: Any) -> None:
        from .retrieve.state import get_state

        if settings is not None and (pipeline or llm or sections):
            raise ConfigError("give either settings= or pipeline/llm/section overrides, not both")
        self.settings = settings or load_settings(pipeline, overrides=sections, llm=llm)
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
            from .llm import get_llm

            self._llm = get_llm(self.settings.llm)
            self._llm_loaded = True
        return self._llm

    def close(self) -> None:
        """Forget this repository version's cached state (a server retiring an old version)."""
        from .retrieve.state import forget_state

        forget_state(self.state.path)

    def retrieve(self, question: str, budget: int | None = None, exclude: set[str] | None = None,
                 docs: list[str] | None = None):
        """The evidence for `question` (a pagerag.records.Retrieval), without deciding. The LLM is
        loaded only when the pipeline routes with it (`retrieve.router = llm`). `exclude`: passage
        ids no operator may return (how the training corpus hides a question's evidence); `docs`:
        document ids of the library the question is limited to (default: all of it)."""
        from .retrieve.api import retrieve

        llm = self.llm if self.settings.retrieve.router == "llm" else None
        return retrieve(_check(question), self.state, self.settings, budget=budget, encode=self.encode, llm=llm,
                        exclude=exclude, docs=docs)

    def entities_in(self, text: str) -> list[dict[str, Any]]:
        """The governed graph's entities that `text` names (exact and fuzzy name links, best
        first, one per entity): `name`, `entity_id`, `type`, `mention`, `start`, `end`, `score`.
        Cheap (no encoder, no LLM): how a chat finds who an earlier turn was about."""
        from .retrieve import linking

        view = self.state.view("governed")
        if not view.graph.entities or not text.strip():
            return []
        tokens = linking.tokenize(text)
        links, covered = linking.link_exact(text, tokens, view)
        fuzzy, _ = linking.link_fuzzy(text, tokens, covered, view, self.settings.retrieve.fuzzy_link_threshold)
        found: dict[str, dict[str, Any]] = {}
        for link in sorted(links + fuzzy, key=lambda l: -l.score):
            if link.entity_id not in found and link.score >= linking.MIN_LINK_SCORE:
                found[link.entity_id] = {"name": link.name, "entity_id": link.entity_id,
                                         "type": view.entity(link.entity_id).type, "mention": link.mention,
                                         "start": link.start, "end": link.end, "score": link.score}
        return sorted(found.values(), key=lambda e: e["start"])

    def ask(self, question: str, exclude: set[str] | None = None, docs: list[str] | None = None):
        """Answer with citations, or refuse with a reason (a pagerag.records.Answer); `exclude` and
        `docs` as in `retrieve`."""
        from .generate.decide import Session, ask

        return ask(_check(question), Session(self.settings, self.state, self.encode, self.llm), exclude=exclude,
                   docs=docs)

    def documents(self) -> list[dict[str, Any]]:
        """The library's documents (id, title, file name, format, words, passages, sha256, added)."""
        from .repository import document_list

        return document_list(self.state.manifest, self.state.passages)


def _check(question: Any) -> str:
    if not isinstance(question, str):
        raise InputError(f"the question must be text, got {type(question).__name__}")
    if not question.strip():
        raise InputError("the question is empty")
    return question
