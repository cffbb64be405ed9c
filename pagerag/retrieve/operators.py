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
from .records import Analysis, Hint, Plan
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


@dataclass
class Candidate:
    row: int  # passage row in the repository
    score: float
    components: dict[str, float] = field(default_factory=dict)
    paths: list[str] = field(default_factory=list)
    communities: list[str] = field(default_factory=list)


@dataclass
class OperatorResult:
    name: str
    candidates: list[Candidate]  # best first
    hints: list[Hint] = field(default_factory=list)


@dataclass
class DenseHits:
    rows: np.ndarray  # best first
    scores: np.ndarray  # cosine, float64


def dense_search(query: Query, k: int) -> DenseHits:
    """Exact cosine nearest passages: in memory over the stored vectors, or a LanceDB query."""
    state = query.state
    k = min(k, len(state.passages))
    if k <= 0:
        return DenseHits(np.zeros(0, np.int64), np.zeros(0, np.float64))
    if query.settings.retrieve.dense_search == "lancedb":
        hits = state.repo.store.search("passages", query.vector, k)
        return DenseHits(np.array([r for r, _ in hits], np.int64), np.array([s for _, s in hits], np.float64))
    sims = state.vectors @ query.vector
    top = np.argpartition(-sims, k - 1)[:k] if k < sims.size else np.arange(sims.size)
    top = top[np.argsort(-sims[top], kind="stable")]
    return DenseHits(top.astype(np.int64), sims[top].astype(np.float64))


def lexical_search(query: Query, k: int) -> tuple[np.ndarray, np.ndarray]:
    rows, scores = query.state.bm25.search(query.question, k)
    return np.asarray(rows, np.int64), np.asarray(scores, np.float64)


def rrf(rankings: list[tuple[list[int], float]], k: int) -> dict[int, float]:
    """Weighted reciprocal-rank fusion: sum over lists of weight / (k + rank), rank from 1."""
    fused: dict[int, float] = {}
    for rows, weight in rankings:
        for rank, row in enumerate(rows, start=1):
            fused[row] = fused.get(row, 0.0) + weight / (k + rank)
    return fused


def text_floor(query: Query, dense: DenseHits, lexical: tuple[np.ndarray, np.ndarray]) -> OperatorResult:
    """O_t: BM25 top-k and dense top-k fused by reciprocal rank."""
    top_k = query.plan.top_k
    dense_rows = [int(r) for r in dense.rows[:top_k]]
    bm25_rows, bm25_scores = lexical
    bm25_list = [int(r) for r in bm25_rows[:top_k]]
    fused = rrf([(dense_rows, 1.0), (bm25_list, 1.0)], query.settings.retrieve.rrf_k)
    dense_of = {int(r): float(s) for r, s in zip(dense.rows, dense.scores)}
    bm25_of = {int(r): float(s) for r, s in zip(bm25_rows, bm25_scores)}
    candidates = []
    for row, score in sorted(fused.items(), key=lambda kv: -kv[1]):
        components = {"rrf": round(score, 6)}
        if row in dense_of:
            components["dense"] = round(dense_of[row], 4)
        if row in bm25_of:
            components["bm25"] = round(bm25_of[row], 4)
        candidates.append(Candidate(row=row, score=score, components=components))
    return OperatorResult("text", candidates)


def similarities(query: Query, rows: list[int]) -> np.ndarray:
    """Cosine of the question with each passage row."""
    if not rows:
        return np.zeros(0, np.float32)
    return query.state.vectors[np.asarray(rows, np.int64)] @ query.vector


def best_rows(query: Query, passage_ids: list[str], n: int) -> list[tuple[int, float]]:
    """The `n` passages of `passage_ids` most similar to the question: [(row, cosine)]."""
    index = query.state.passage_index
    rows = sorted({index[p] for p in passage_ids if p in index})
    if not rows:
        return []
    sims = similarities(query, rows)
    order = np.argsort(-sims, kind="stable")[:n]
    return [(rows[i], float(sims[i])) for i in order]
