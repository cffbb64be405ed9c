"""Query analysis u = Psi(q, R): entity links plus the evidence need of the question.

The need is one of local (a fact about one thing), relational (how linked things relate),
multi-hop (a chain: a statement then a question, nested "the X of the Y who…") and global
(themes, arcs, summaries). A classifier fitted on the training books decides (need.py; its class
probabilities go to the ranker as features); with `retrieve.router = "llm"` and an LLM
configured, prompts/route_query asks the LLM. The analysis records who decided and why.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import BackendError, InputError
from ..settings import Settings
from ..text.sentences import split_sentences
from . import linking
from .need import load_need_model, need_of
from ..records import NEEDS, Analysis, StageCost
from .state import RepoState
from .views import GraphView

Encode = Callable[[list[str]], np.ndarray]
MAX_BRIDGES = 3

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


def classify_need(question: str, question_vec: np.ndarray) -> tuple[str, str, str, dict[str, float]]:
    """(need, decided_by, reason, class probabilities) from the fitted classifier (need.py)."""
    probabilities = load_need_model().probabilities(question, question_vec)
    need, reason = need_of(question, probabilities)
    return need, "classifier", reason, probabilities


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
    at a different evidence site, so the text floor also searches them one by one (whatever the
    need)."""
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
    need, decided_by, reason, scores = classify_need(question, linked.question_vec)
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
