"""The text-floor operator O_t and the types every operator shares.

An operator takes the `Query` (question, its vector, the analysis, the repository state, the
plan) and returns an `OperatorResult`: candidate passages (repository rows), best first, each
with its operator score and score components, plus structural hints. Graph operators live in
graph_operators.py; reranking in rerank.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..settings import Settings
from ..records import Analysis, Hint, Plan
from .state import RepoState


@dataclass
class Query:
    question: str
    vector: np.ndarray  # float32 unit vector of the question
    analysis: Analysis
    state: RepoState
    plan: Plan
    settings: Settings
    encode: Callable[[list[str]], np.ndarray]
    # Passage rows hidden for this question (`retrieve(exclude=...)`): never candidates of any
    # operator, as if they were not in the repository (training corpora mask evidence this way).
    exclude: frozenset[int] = frozenset()


@dataclass
class Candidate:
    row: int  # passage row in the repository
    score: float
    components: dict[str, float] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)
    communities: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)  # the graph entities that led here (PPR provenance)


@dataclass
class OperatorResult:
    name: str
    candidates: list[Candidate]  # best first
    hints: list[Hint] = field(default_factory=list)
    # Scores an operator gives every passage (PPR mass, the nearest opened community), by name:
    # the ranker reads them for candidates other operators proposed too.
    vectors: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class DenseHits:
    rows: np.ndarray  # best first
    scores: np.ndarray  # cosine, float64


def dense_search(query: Query, k: int) -> DenseHits:
    """Exact cosine nearest passages: in memory over the stored vectors, or a LanceDB query."""
    state = query.state
    if use_lancedb(state, query.settings.retrieve.dense_search):
        k = min(k, len(state.passages))
        if k <= 0:
            return DenseHits(np.zeros(0, np.int64), np.zeros(0, np.float64))
        hits = state.repo.store.search("passages", query.vector, k + len(query.exclude))
        hits = [(r, s) for r, s in hits if r not in query.exclude][:k]
        return DenseHits(np.array([r for r, _ in hits], np.int64), np.array([s for _, s in hits], np.float64))
    rows, sims = top_similar(state.vectors @ query.vector, k, query.exclude)
    return DenseHits(rows, sims.astype(np.float64))


def use_lancedb(state: RepoState, mode: str) -> bool:
    """Whether dense search is a LanceDB query: asked for, or (auto) the table has an ANN index."""
    if mode != "auto":
        return mode == "lancedb"
    return state.memo("ann_index", lambda: bool((state.manifest.get("ann") or {}).get("rows")))


def top_similar(sims: np.ndarray, k: int, exclude: frozenset[int] = frozenset()) -> tuple[np.ndarray, np.ndarray]:
    """The k best rows of a similarity vector (best first, stable) and their scores, never an
    excluded row."""
    sims = hide(sims, exclude)
    k = min(k, sims.size - len(exclude))
    if k <= 0:
        return np.zeros(0, np.int64), np.zeros(0, sims.dtype)
    top = np.argpartition(-sims, k - 1)[:k] if k < sims.size else np.arange(sims.size)
    top = top[np.argsort(-sims[top], kind="stable")][:k]
    return top.astype(np.int64), sims[top]


def hide(sims: np.ndarray, exclude: frozenset[int]) -> np.ndarray:
    """`sims` with the excluded rows at -inf (a copy when anything is excluded)."""
    if not exclude:
        return sims
    sims = sims.astype(np.float64)
    sims[np.fromiter(exclude, np.int64, len(exclude))] = -np.inf
    return sims


def lexical_search(query: Query, k: int, text: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """BM25 top-k of the question (or of `text`), never an excluded row."""
    rows, scores = query.state.bm25.search(query.question if text is None else text, k + len(query.exclude))
    rows, scores = np.asarray(rows, np.int64), np.asarray(scores, np.float64)
    if query.exclude:
        keep = np.fromiter((int(r) not in query.exclude for r in rows), bool, len(rows))
        rows, scores = rows[keep], scores[keep]
    return rows[:k], scores[:k]


def rrf(rankings: list[tuple[list[int], float]], k: int) -> dict[int, float]:
    """Weighted reciprocal-rank fusion: sum over lists of weight / (k + rank), rank from 1."""
    fused: dict[int, float] = {}
    for rows, weight in rankings:
        for rank, row in enumerate(rows, start=1):
            fused[row] = fused.get(row, 0.0) + weight / (k + rank)
    return fused


def text_floor(query: Query, dense: DenseHits, lexical: tuple[np.ndarray, np.ndarray],
               parts: list[tuple[str, np.ndarray]] = ()) -> OperatorResult:
    """O_t: BM25 top-k and dense top-k fused by reciprocal rank.

    A question of several sentences (`parts`: each one's text and vector) gives each its own
    fused list, and the lists are interleaved (whole, part 1, part 2, whole, …): every evidence
    site of the chain gets a high rank, not only the one the whole question is closest to.
    """
    top_k = query.plan.top_k
    k = query.settings.retrieve.rrf_k
    bm25_rows, bm25_scores = lexical
    whole = rrf([([int(r) for r in dense.rows[:top_k]], 1.0), ([int(r) for r in bm25_rows[:top_k]], 1.0)], k)
    ranked_lists = [sorted(whole, key=lambda r: -whole[r])]
    for text, vector in parts:
        sims = hide(query.state.vectors @ vector, query.exclude)
        part_dense = [int(r) for r in np.argsort(-sims, kind="stable")[: min(top_k, sims.size - len(query.exclude))]]
        part_bm25 = [int(r) for r in lexical_search(query, top_k, text)[0]]
        fused = rrf([(part_dense, 1.0), (part_bm25, 1.0)], k)
        ranked_lists.append(sorted(fused, key=lambda r: -fused[r]))
    order = _interleave(ranked_lists)[: top_k * len(ranked_lists)] if parts else ranked_lists[0]
    dense_of = {int(r): float(s) for r, s in zip(dense.rows, dense.scores)}
    bm25_of = {int(r): float(s) for r, s in zip(bm25_rows, bm25_scores)}
    candidates = []
    for rank, row in enumerate(order, start=1):
        score = whole[row] if not parts else 2.0 / (k + rank)  # interleaved: the rank is the score
        components = {"rrf": round(score, 6)}
        if row in dense_of:
            components["dense"] = round(dense_of[row], 4)
        if row in bm25_of:
            components["bm25"] = round(bm25_of[row], 4)
        candidates.append(Candidate(row=row, score=score, components=components))
    return OperatorResult("text", candidates)


def _interleave(lists: list[list[int]]) -> list[int]:
    seen: dict[int, None] = {}
    for i in range(max(len(l) for l in lists)):
        for l in lists:
            if i < len(l):
                seen.setdefault(l[i], None)
    return list(seen)


def similarities(query: Query, rows: list[int]) -> np.ndarray:
    """Cosine of the question with each passage row."""
    if not rows:
        return np.zeros(0, np.float32)
    return query.state.vectors[np.asarray(rows, np.int64)] @ query.vector


def best_rows(query: Query, passage_ids: list[str], n: int) -> list[tuple[int, float]]:
    """The `n` passages of `passage_ids` most similar to the question: [(row, cosine)]."""
    index = query.state.passage_index
    rows = sorted({index[p] for p in passage_ids if p in index} - query.exclude)
    if not rows:
        return []
    sims = similarities(query, rows)
    order = np.argsort(-sims, kind="stable")[:n]
    return [(rows[i], float(sims[i])) for i in order]
