"""Personalised PageRank over the entity–passage graph (the PPR operator, after HippoRAG 2).

The graph has one node per governed entity and one per passage: an entity is joined to every
passage it is mentioned in, and to the entities it is related to (edge strength of their
aggregated relations). A question seeds the walk at its linked entities and, as in HippoRAG 2,
at its dense top passages (min-max normalised cosines); the walk restarts at the seeds with
probability 1 - DAMPING at every step. A passage's score is its stationary mass, so a passage
that several seeds reach through shared entities rises even when its own wording is far from
the question. Each passage candidate names the entities that carried the most mass into it
(its provenance).

The transition matrix is built once per repository view (`RepoState.ppr_graph`, with
`views.build_ppr_graph`) as a scipy CSR matrix; a question's two walks cost at most ITERATIONS
sparse products each (about a millisecond each on a 2,000-passage book) and run side by side.
"""
from __future__ import annotations

import numpy as np

from .operators import Candidate, DenseHits, OperatorResult, Query
from .plan import strong_links
from .views import PPRGraph, build_ppr_graph  # noqa: F401 - build_ppr_graph: importable from here
from .workers import side_by_side

DAMPING = 0.5  # HippoRAG 2's damping: the walk continues with probability 0.5 per step
ITERATIONS = 30
TOLERANCE = 1e-5  # L1 change per step; on 26 books the ranked masses then differ from 1e-7's by < 1e-6 relative
ENTITY_SEED_SHARE = 0.5  # of the restart mass, when the question links an entity
SEED_PASSAGES = 20  # dense top passages that seed the walk
PROVENANCE = 2  # entities named per candidate


def personalised_pagerank(graph: PPRGraph, seeds: np.ndarray, damping: float = DAMPING,
                          blocked: np.ndarray | None = None) -> np.ndarray:
    """Stationary distribution of the walk that restarts at `seeds` (normalised to sum 1).

    `blocked` nodes (hidden passages) absorb what reaches them: their mass is dropped, so nothing
    flows through them and they end with no score of their own."""
    total = float(seeds.sum())
    if total <= 0:
        return np.zeros(graph.size)
    restart = seeds / total
    keep = None if blocked is None or not blocked.any() else ~blocked
    if keep is not None:
        restart = restart * keep
    x = restart.copy()
    for _ in range(ITERATIONS):
        spread = x if keep is None else x * keep
        nxt = damping * (graph.transition @ spread)
        lost = damping * float(spread[graph.dangling].sum())
        nxt += (1.0 - damping + lost) * restart
        if keep is not None:
            nxt *= keep
        if float(np.abs(nxt - x).sum()) < TOLERANCE:
            x = nxt
            break
        x = nxt
    return x


def seed_vector(graph: PPRGraph, query: Query, dense: DenseHits, entity_share: float = ENTITY_SEED_SHARE,
                n_passages: int = SEED_PASSAGES) -> np.ndarray:
    """Restart mass: the linked entities (by link score) and the dense top passages (min-max
    normalised cosine), each group normalised, mixed by `entity_share`."""
    view = query.state.view(query.plan.graph)
    seeds = np.zeros(graph.size)
    entity_part = np.zeros(graph.size)
    for link in strong_links(query.analysis):
        row = view.entity_row.get(link.entity_id)
        if row is not None:
            entity_part[row] = max(entity_part[row], link.score)
    passage_part = np.zeros(graph.size)
    rows, scores = dense.rows[:n_passages], dense.scores[:n_passages]
    if rows.size and n_passages > 0:
        low, high = float(scores.min()), float(scores.max())
        norm = (scores - low) / (high - low) if high > low else np.ones_like(scores)
        passage_part[graph.n_entities + rows] = np.maximum(norm, 0.0) + 1e-3  # the last seed keeps a little
    for part, share in ((entity_part, entity_share), (passage_part, 1.0 - entity_share)):
        if part.sum() > 0:
            seeds += share * part / part.sum()
    return seeds


def ppr(query: Query, dense: DenseHits) -> OperatorResult:
    """O_ppr: the passages with the most stationary mass, best first. Its vectors hold every
    passage's mass divided by the best one's, from the mixed seeds ("ppr") and from the linked
    entities alone ("ppr_entity"): ranker features for candidates of any operator."""
    graph = query.state.ppr_graph(query.plan.graph)
    blocked = None
    if query.exclude:
        blocked = np.zeros(graph.size, bool)
        blocked[graph.n_entities + np.fromiter(query.exclude, np.int64, len(query.exclude))] = True
    # the mixed walk, and the walk from the linked entities alone (graph proximity, apart from
    # the dense seeds), side by side: each spends its time in scipy's sparse product, which
    # lets go of the GIL (26 books: ~13 ms a walk)
    mass, entity_mass = side_by_side(
        lambda: personalised_pagerank(graph, seed_vector(graph, query, dense), blocked=blocked),
        lambda: personalised_pagerank(graph, seed_vector(graph, query, dense, entity_share=1.0, n_passages=0),
                                      blocked=blocked))
    entity_mass = entity_mass[graph.n_entities:]
    passage_mass = mass[graph.n_entities:]
    best = float(passage_mass.max()) if passage_mass.size else 0.0
    if best <= 0:
        return OperatorResult("ppr", [])
    relative = passage_mass / best
    vectors = {"ppr": relative, "ppr_entity": entity_mass / entity_mass.max() if entity_mass.max() > 0 else entity_mass}
    entity_node_mass = mass[: graph.n_entities]
    # the top of the mixed walk, then the top of the entity walk it has not already proposed
    rows = _top(relative, query.plan.top_k) + _top(vectors["ppr_entity"], query.plan.top_k // 2)
    candidates = []
    for row in dict.fromkeys(rows):
        if row in query.exclude:
            continue
        candidates.append(Candidate(row=row, score=float(relative[row]),
                                    components={"ppr": round(float(relative[row]), 6),
                                                "ppr_entity": round(float(vectors["ppr_entity"][row]), 6)},
                                    entities=_provenance(graph, entity_node_mass, row)))
    return OperatorResult("ppr", candidates, vectors=vectors)


def _top(scores: np.ndarray, k: int) -> list[int]:
    """The rows of the k highest positive scores, best first."""
    k = min(k, int((scores > 0).sum()))
    if k <= 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
    return top[np.argsort(-scores[top], kind="stable")].tolist()


def _provenance(graph: PPRGraph, entity_mass: np.ndarray, row: int) -> list[str]:
    """The entities of passage `row` that hold the most mass (the ones that led the walk here)."""
    indptr, indices = graph.passage_entities.indptr, graph.passage_entities.indices
    members = indices[indptr[row] : indptr[row + 1]]
    if members.size == 0:
        return []
    order = members[np.argsort(-entity_mass[members], kind="stable")][:PROVENANCE]
    return [graph.entity_names[i] for i in order.tolist() if entity_mass[i] > 0]
