"""Fuse the operators' ranked lists into one pool, then let the rerank operator reorder it.

Fusion is weighted reciprocal-rank fusion: the text floor counts 1, a graph operator its budget
share in the plan times GRAPH_WEIGHT, so the route decides how much structure nudges the order
(graph-only passages still get in through their budget share, see evidence.py). Rerank adds its
own reciprocal-rank term (RERANK_WEIGHT) over the best-window scores of the head of the pool;
that term puts candidates of all operators on one relevance scale.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..records import Plan, Window
from .operators import OperatorResult

RERANK_WEIGHT = 1.0
GRAPH_WEIGHT = 0.5  # times the operator's budget share


@dataclass
class PoolItem:
    row: int
    fused: float
    operators: dict[str, dict[str, float]] = field(default_factory=dict)  # op -> components + score
    paths: list[str] = field(default_factory=list)
    communities: list[str] = field(default_factory=list)
    window: Window | None = None  # the best sentence window, once reranked
    final: float = 0.0


def fuse(results: list[OperatorResult], plan: Plan, k: int) -> list[PoolItem]:
    """One item per passage, best fused score first."""
    pool: dict[int, PoolItem] = {}
    for result in results:
        # The text floor ranks by relevance and counts fully; a graph operator's list counts by
        # its budget share, so structure nudges the order without outvoting relevance.
        weight = 1.0 if result.name == "text" else GRAPH_WEIGHT * plan.shares.get(result.name, 0.0)
        for rank, cand in enumerate(result.candidates, start=1):
            item = pool.setdefault(cand.row, PoolItem(row=cand.row, fused=0.0))
            item.fused += weight / (k + rank)
            item.operators[result.name] = {"score": round(cand.score, 6), **cand.components}
            item.paths += [p for p in cand.paths if p not in item.paths]
            item.communities += [c for c in cand.communities if c not in item.communities]
    items = sorted(pool.values(), key=lambda it: (-it.fused, it.row))
    for it in items:
        it.final = it.fused
    return items


def apply_rerank(items: list[PoolItem], best_windows: dict[int, Window], k: int) -> list[PoolItem]:
    """Add the rerank term (from each scored row's best window) and reorder the pool by the final score."""
    by_row = best_windows
    ranked = sorted(by_row, key=lambda row: -by_row[row].score)
    rank_of = {row: r for r, row in enumerate(ranked, start=1)}
    for it in items:
        it.final = it.fused
        if it.row in by_row:
            it.window = by_row[it.row]
            it.final += RERANK_WEIGHT / (k + rank_of[it.row])
    # Unscored items keep their fused score but never outrank scored ones of the same pool head.
    return sorted(items, key=lambda it: (it.window is None, -it.final, it.row))
