"""One pool of candidates: the union of what every operator proposed, with each candidate's
features for the ranker (ranker.py).

Every operator proposes passages with its own score; nothing here weighs one operator against
another. A candidate keeps, per operator that proposed it, its score, its rank and its score
components, plus the structure that led to it (paths, communities, PPR entities). `features`
turns the pool into one row of numbers per candidate, in FEATURES order: the text floor's
signals (dense cosine, BM25, their ranks, the best sentence window's cosine), the graph's
(PPR mass from the mixed seeds and from the linked entities alone, how many of the question's
linked entities the passage mentions, neighbour structure, path and community scores, the
relevance of the nearest opened community holding the passage), and the graph signals times the
question's need probabilities (so the ranker can trust the community operator more for a global
question, a path more for a complex one).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..records import Window
from .operators import DenseHits, OperatorResult

TEXT_FEATURES = ("dense", "dense_gap", "dense_rr", "bm25", "bm25_rr", "text_rr", "window", "window_gap",
                 "window_rr", "tokens")
GRAPH_FEATURES = ("ppr", "ppr_rr", "ppr_entity", "links", "links_all", "neighbour", "neighbour_in", "path",
                  "path_in", "community", "community_in", "community_member", "centrality", "graph_only",
                  "global_x_community", "global_x_member", "global_x_ppr", "complex_x_path", "complex_x_ppr",
                  "complex_x_links", "complex_x_neighbour", "local_x_neighbour")
FEATURES = TEXT_FEATURES + GRAPH_FEATURES


@dataclass
class PoolItem:
    row: int
    operators: dict[str, dict[str, float]] = field(default_factory=dict)  # op -> score, rank, components
    paths: list[str] = field(default_factory=list)
    communities: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    window: Window | None = None  # the best sentence window, once reranked
    final: float = 0.0  # the ranker's score (log-odds of holding gold evidence)


def build_pool(results: list[OperatorResult]) -> list[PoolItem]:
    """One item per passage, in first-proposed order (text floor first)."""
    pool: dict[int, PoolItem] = {}
    for result in results:
        for rank, cand in enumerate(result.candidates, start=1):
            item = pool.setdefault(cand.row, PoolItem(row=cand.row))
            item.operators[result.name] = {"score": round(cand.score, 6), "rank": rank, **cand.components}
            item.paths += [p for p in cand.paths if p not in item.paths]
            item.communities += [c for c in cand.communities if c not in item.communities]
            item.entities += [e for e in cand.entities if e not in item.entities]
    return list(pool.values())


@dataclass
class QuestionSignals:
    """What the features read besides the pool: the question's dense and BM25 hits, the passage
    vectors, every operator's full score vector (PPR), and the need probabilities."""

    question_vec: np.ndarray
    vectors: np.ndarray  # passage vectors
    n_tokens: np.ndarray  # per passage
    dense: DenseHits
    bm25_rows: np.ndarray
    bm25_scores: np.ndarray
    need: dict[str, float]  # local / complex / global probabilities
    full_scores: dict[str, np.ndarray] = field(default_factory=dict)  # name -> score per passage row
    links: list[tuple[float, frozenset[int]]] = field(default_factory=list)  # linked entity: (score, its rows)


def features(items: list[PoolItem], signals: QuestionSignals, names: tuple[str, ...] = FEATURES) -> np.ndarray:
    """(len(items), len(names)) feature matrix; a feature an item lacks is 0."""
    if not items:
        return np.zeros((0, len(names)))
    rows = np.array([it.row for it in items], np.int64)
    cols: dict[str, np.ndarray] = {}
    dense = signals.vectors[rows] @ signals.question_vec
    best_dense = float(signals.dense.scores[0]) if signals.dense.scores.size else float(dense.max())
    cols["dense"] = dense
    cols["dense_gap"] = dense - best_dense
    cols["dense_rr"] = _reciprocal_ranks(rows, signals.dense.rows)
    bm25_of = dict(zip(signals.bm25_rows.tolist(), signals.bm25_scores.tolist()))
    top_bm25 = float(signals.bm25_scores[0]) if signals.bm25_scores.size and signals.bm25_scores[0] > 0 else 1.0
    cols["bm25"] = np.array([bm25_of.get(int(r), 0.0) / top_bm25 for r in rows])
    cols["bm25_rr"] = _reciprocal_ranks(rows, signals.bm25_rows)
    cols["text_rr"] = _op_rr(items, "text")
    window = np.array([it.window.score if it.window is not None else d for it, d in zip(items, dense)])
    cols["window"] = window
    cols["window_gap"] = window - window.max()
    order = np.argsort(-window, kind="stable")
    window_rank = np.empty(len(items))
    window_rank[order] = np.arange(1, len(items) + 1)
    cols["window_rr"] = 1.0 / window_rank
    cols["tokens"] = signals.n_tokens[rows] / 200.0
    cols["ppr"] = _vector(signals, "ppr", rows)
    cols["ppr_rr"] = _op_rr(items, "ppr")
    cols["ppr_entity"] = _vector(signals, "ppr_entity", rows)
    total = sum(score for score, _ in signals.links) or 1.0
    cols["links"] = np.array([sum(score for score, rs in signals.links if int(r) in rs) for r in rows]) / total
    many = len(signals.links) >= 2
    cols["links_all"] = np.array([float(many and all(int(r) in rs for _, rs in signals.links)) for r in rows])
    cols["community_member"] = _vector(signals, "community_member", rows)
    cols["neighbour"] = _component(items, "neighbour", "structure")
    cols["neighbour_in"] = _proposed(items, "neighbour")
    cols["path"] = _component(items, "path", "path")
    cols["path_in"] = _proposed(items, "path")
    cols["community"] = _component(items, "community", "community")
    cols["community_in"] = _proposed(items, "community")
    cols["centrality"] = _component(items, "community", "centrality")
    graph_ops = ("neighbour", "path", "community", "ppr")
    cols["graph_only"] = np.array([float("text" not in it.operators and any(o in it.operators for o in graph_ops))
                                   for it in items])
    p_local, p_complex, p_global = (signals.need.get(k, 0.0) for k in ("local", "complex", "global"))
    cols["global_x_community"] = p_global * cols["community_in"]
    cols["global_x_member"] = p_global * cols["community_member"]
    cols["global_x_ppr"] = p_global * cols["ppr"]
    cols["complex_x_path"] = p_complex * cols["path_in"]
    cols["complex_x_ppr"] = p_complex * cols["ppr"]
    cols["complex_x_links"] = p_complex * cols["links"]
    cols["complex_x_neighbour"] = p_complex * cols["neighbour_in"]
    cols["local_x_neighbour"] = p_local * cols["neighbour_in"]
    return np.column_stack([np.asarray(cols[n], np.float64) for n in names])


def _vector(signals: QuestionSignals, name: str, rows: np.ndarray) -> np.ndarray:
    vec = signals.full_scores.get(name)
    return vec[rows] if vec is not None else np.zeros(len(rows))


def _reciprocal_ranks(rows: np.ndarray, ranked: np.ndarray) -> np.ndarray:
    rank_of = {int(r): i for i, r in enumerate(ranked.tolist(), start=1)}
    return np.array([1.0 / rank_of[int(r)] if int(r) in rank_of else 0.0 for r in rows])


def _op_rr(items: list[PoolItem], op: str) -> np.ndarray:
    return np.array([1.0 / it.operators[op]["rank"] if op in it.operators else 0.0 for it in items])


def _proposed(items: list[PoolItem], op: str) -> np.ndarray:
    return np.array([float(op in it.operators) for it in items])


def _component(items: list[PoolItem], op: str, key: str) -> np.ndarray:
    return np.array([float(it.operators[op].get(key, 0.0)) if op in it.operators else 0.0 for it in items])
