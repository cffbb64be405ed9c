"""Query analysis u = Psi(q, R): entity links plus the evidence need of the question.

The need is one of local (a fact about one thing), relational (how linked things relate),
multi-hop (a chain: a statement then a question, nested "the X of the Y who…") and global
(themes, arcs, summaries). Rules decide when the wording says it outright; otherwise the
nearest-prototype classifier does (need_prototypes.toml, embedded once and cached); with
`retrieve.router = "llm"` and an LLM configured, prompts/route_query asks the LLM. The analysis
records who decided and why.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import BackendError, InputError
from ..settings import Settings
from ..text.sentences import split_sentences
from . import linking
from ..records import NEEDS, Analysis, StageCost
from .state import GraphView, RepoState

Encode = Callable[[list[str]], np.ndarray]
MAX_BRIDGES = 3

_GLOBAL = re.compile(
    r"\b(overall|over the course of|throughout|as a whole|(whole|entire) (book|story|novel|journey)|"
    r"main (themes?|ideas?|points?|characters?|events?)|themes?|summari[sz]e|summary|in general|recurring|"
    r"moral (of|does)|central (idea|conflict|theme)|what is the (book|story|novel) (mostly )?about)\b",
    re.IGNORECASE,
)
_RELATIONAL = re.compile(
    r"\b(relationship|related|relation to|in relation|connected|connection|connects?|linked|"
    r"with respect to|acquainted|how does \w+(?: \w+)? (treat|regard|feel about)|(brother|sister|father|"
    r"mother|son|daughter|wife|husband|uncle|aunt|nephew|niece|cousin|friend|employer|master) of)\b",
    re.IGNORECASE,
)
# "the X of the Y who/that…": a nested description the answer has to resolve in two steps
_NESTED = re.compile(r"\bthe \w+(?: \w+)? of the \w+(?: \w+)? (who|whom|that|which|whose)\b", re.IGNORECASE)
# A single fact asked outright: a number, a date, a place, a name
_FACT = re.compile(
    r"^(according to [^,]+, )?(how (many|much|long|late|old|far|often|tall)|in what year|what year|on what date|"
    r"(when|where) (did|does|do|is|was|were|will|would|had|has)|what is the name|what (colou?r|time|date|day|kind|sort|type|size)|which (year|day|month))\b",
    re.IGNORECASE,
)
_LATIN = re.compile(r"[A-Za-z]")


def validate_question(question: str, max_chars: int) -> str:
    if not isinstance(question, str) or not question.strip():
        raise InputError("the question is empty")
    question = question.strip()
    if len(question) > max_chars:
        raise InputError(
            f"the question is {len(question):,} characters long; the limit is {max_chars:,} "
            "(retrieve.max_question_chars) — ask a shorter question"
        )
    return question


def rule_need(question: str, n_linked: int) -> tuple[str | None, str]:
    """(need, reason) when the wording decides, else (None, "")."""
    if m := _GLOBAL.search(question):
        return "global", f"global cue '{m.group(0)}'"
    if len(split_sentences(question)) >= 2:
        return "multi-hop", "a statement followed by a question (two evidence sites)"
    if m := _NESTED.search(question):
        return "multi-hop", f"nested description '{m.group(0)}'"
    if m := _RELATIONAL.search(question):
        return "relational", f"relational cue '{m.group(0)}'"
    if m := _FACT.search(question):
        return "local", f"single-fact question '{m.group(0)}'"
    return None, ""



@functools.lru_cache(maxsize=4)
def _prototype_texts() -> tuple[tuple[str, ...], tuple[str, ...]]:
    import tomllib
    from pathlib import Path

    data = tomllib.loads((Path(__file__).with_name("need_prototypes.toml")).read_text(encoding="utf-8"))
    labels, texts = [], []
    for need in NEEDS:
        for text in data.get(need, []):
            labels.append(need)
            texts.append(text)
    return tuple(labels), tuple(texts)


_PROTOTYPE_VECTORS: dict[str, np.ndarray] = {}


def prototype_vectors(model: str, encode: Encode) -> tuple[list[str], np.ndarray]:
    """Labels and embeddings of the prototype questions (once per process, disk-cached)."""
    from .state import _cached_vectors

    labels, texts = _prototype_texts()
    if model not in _PROTOTYPE_VECTORS:
        safe = re.sub(r"[^A-Za-z0-9]+", "_", model)[-40:]
        _PROTOTYPE_VECTORS[model] = _cached_vectors(f"prototypes-{safe}", list(texts), encode)
    return list(labels), _PROTOTYPE_VECTORS[model]


def prototype_scores(question_vec: np.ndarray, labels: list[str], vectors: np.ndarray, top: int = 3) -> dict[str, float]:
    """Per need, the mean of its `top` best cosines to the question."""
    sims = vectors @ question_vec
    out = {}
    for need in NEEDS:
        mine = np.sort(sims[[i for i, l in enumerate(labels) if l == need]])[::-1][:top]
        out[need] = round(float(mine.mean()), 4) if mine.size else 0.0
    return out


def classify_need(question: str, question_vec: np.ndarray, n_linked: int, model: str, encode: Encode
                  ) -> tuple[str, str, str, dict[str, float]]:
    """(need, decided_by, reason, prototype scores)."""
    labels, vectors = prototype_vectors(model, encode)
    scores = prototype_scores(question_vec, labels, vectors)
    need, reason = rule_need(question, n_linked)
    if need is not None:
        return need, "rules", reason, scores
    ranked = sorted(scores, key=scores.get, reverse=True)
    best, second = ranked[0], ranked[1]
    return best, "prototype", (
        f"nearest prototypes: {best} {scores[best]:.2f} vs {second} {scores[second]:.2f}"
    ), scores


def llm_need(question: str, analysis: Analysis, llm, cost: StageCost) -> tuple[str, str]:
    """(need, reason) from the LLM via prompts/route_query; its tokens are added to `cost`."""
    from ..llm import charged, complete_json, render_prompt

    entities = ", ".join(l.name for l in analysis.links) or "(none found)"
    messages = render_prompt("route_query", question=question, entities=entities)
    reply, _ = charged(llm, cost, lambda: complete_json(llm, messages, max_tokens=120, required=("need",)))
    need = str(reply.get("need", "")).strip().lower().replace("_", "-").replace("multihop", "multi-hop")
    if need not in NEEDS:
        raise BackendError(f"the LLM router answered need '{need}', not one of {', '.join(NEEDS)}")
    return need, str(reply.get("reason", "")).strip()[:200]


def bridge_texts(links: list, view: GraphView, limit: int = MAX_BRIDGES) -> list[str]:
    """Hop-2 queries made from the graph: each pair of linked entities, then each linked entity
    with its heaviest neighbour (the paper's bridge queries, from structure instead of SVO)."""
    ids = list(dict.fromkeys(l.entity_id for l in links if l.entity_id in view.nx))
    bridges = [f"{view.entity(a).name} {view.entity(b).name}" for i, a in enumerate(ids) for b in ids[i + 1 :]]
    for a in ids:
        if view.nx[a]:
            other = max(view.nx[a], key=lambda n: view.nx[a][n]["info"].weight)
            bridges.append(f"{view.entity(a).name} {view.entity(other).name}")
    return list(dict.fromkeys(bridges))[:limit]


@dataclass
class Linked:
    links: list
    mentions: list[str]
    question_vec: np.ndarray
    bridges: list[str] = field(default_factory=list)
    bridge_vecs: np.ndarray | None = None
    parts: list[str] = field(default_factory=list)  # the question's sentences, when it has several
    part_vecs: np.ndarray | None = None


def link_question(question: str, view: GraphView | None, settings: Settings, encode: Encode) -> Linked:
    """Entity links, name-like mentions, the question vector and the bridge queries' vectors,
    all from one encoder call (a small batch costs little more than one text)."""
    tokens = linking.tokenize(question)
    spans = linking.candidate_mentions(question)
    mentions = [s.text for s in spans]
    parts = question_parts(question)
    if view is None or not view.graph.entities or settings.retrieve.max_links == 0:
        vectors = encode([question, *parts])
        return Linked([], mentions, vectors[0], parts=parts, part_vecs=vectors[1:])
    links, covered = linking.link_exact(question, tokens, view)
    fuzzy, _ = linking.link_fuzzy(question, tokens, covered, view, settings.retrieve.fuzzy_link_threshold)
    links = linking.best_links(links + fuzzy, settings.retrieve.max_links)
    rest = linking.unlinked_spans(spans, links)
    bridges = bridge_texts([l for l in links if l.score >= linking.MIN_LINK_SCORE], view)
    vectors = encode([question, *[s.text for s in rest], *bridges, *parts])
    span_vecs = vectors[1 : 1 + len(rest)]
    links += linking.link_embedding(question, rest, span_vecs, view, settings.retrieve.embedding_link_threshold)
    after = 1 + len(rest) + len(bridges)
    return Linked(linking.best_links(links, settings.retrieve.max_links), mentions, vectors[0],
                  bridges, vectors[1 + len(rest) : after], parts, vectors[after:])


def question_parts(question: str, limit: int = 3) -> list[str]:
    """The sentences of a question that has several ("X did Y. What did Z…?"): each part points
    at a different evidence site, so the multi-hop route also searches them one by one."""
    sentences = split_sentences(question)
    if len(sentences) < 2:
        return []
    return [question[s:e] for s, e in sentences[:limit]]


def analyse(question: str, state: RepoState, settings: Settings, encode: Encode, llm=None,
            cost: StageCost | None = None) -> tuple[Analysis, Linked]:
    """u = Psi(q, R), plus the question's embedding and bridge queries (reused downstream).
    With `retrieve.router = llm`, `llm` (the caller's, built once) classifies the need and its
    tokens go to `cost`."""
    question = validate_question(question, settings.retrieve.max_question_chars)
    kind = settings.retrieve.graph
    view = state.view(kind) if kind != "none" else None
    notes = []
    if not _LATIN.search(question):
        notes.append("the question has no Latin-script words: lexical search and name matching find nothing; "
                     "only dense retrieval can help")
    if view is None:
        notes.append("graph disabled by the pipeline (retrieve.graph = none): no entity linking")
    linked = link_question(question, view, settings, encode)
    linked.question_vec = np.asarray(linked.question_vec, dtype=np.float32)
    need, decided_by, reason, scores = classify_need(question, linked.question_vec, len(linked.links),
                                                     settings.embed.model, encode)
    analysis = Analysis(question=question, links=linked.links, need=need, decided_by=decided_by, reason=reason,
                        need_scores=scores, mentions=linked.mentions, notes=notes)
    if settings.retrieve.router == "llm":
        _route_with_llm(analysis, llm, cost if cost is not None else StageCost())
    return analysis, linked


def _route_with_llm(analysis: Analysis, llm, cost: StageCost) -> None:
    fallback = analysis.decided_by
    if llm is None:
        analysis.notes.append(f"router = llm but no LLM is configured; {fallback} decided")
        return
    try:
        decided = llm_need(analysis.question, analysis, llm, cost)
    except BackendError as exc:
        analysis.notes.append(f"LLM router failed ({exc}); {fallback} decided")
        return
    analysis.need, analysis.decided_by, analysis.reason = decided[0], "llm", decided[1] or "LLM route_query"
