"""Graph operators: neighbour O_n and path O_p (community O_c is in communities.py, PPR in ppr.py).

Each reads the graph view the plan names (governed or raw) and turns structure back into the
passages it came from (provenance), so graph evidence is always quotable source text. Passages
hidden by `retrieve(exclude=...)` are never returned, and a path never crosses an edge whose
every relation comes from hidden passages (its statement would quote them).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from .operators import Candidate, OperatorResult, Query, best_rows, similarities
from .plan import strong_links
from ..records import Hint
from .views import EdgeInfo, GraphView, edge_strength

# How much graph strength counts against question similarity when ranking graph passages.
STRUCTURE_WEIGHT = 0.25
PASSAGES_PER_EDGE = 2
MAX_PATH_ENDPOINTS = 4
MAX_BRANCH = 60  # neighbours of a path endpoint explored for 3-hop paths (heaviest first)
HUB_SPECIFICITY = 0.25  # idf share below which an entity is a hub (in ~1/3+ of a book's passages)


def view_for(query: Query) -> GraphView:
    return query.state.view(query.plan.graph)


# --------------------------------------------------------------------------------------------
# Neighbour


def is_hub(view: GraphView, entity_id: str) -> bool:
    """An entity in a large share of all passages (the protagonist, "man"): its neighbourhood is
    most of the book, so it says nothing about a question on its own."""
    return float(view.specificity[view.entity_row[entity_id]]) < HUB_SPECIFICITY


def neighbour(query: Query) -> OperatorResult:
    """O_n: the passages behind each linked entity's edges (its 1-hop neighbourhood) and its own
    mentions, scored by question similarity plus edge strength (an edge to another linked entity
    counts most). A hub contributes only its edges to the other linked entities."""
    view = view_for(query)
    links = [l for l in strong_links(query.analysis) if l.entity_id in view.entity_row]
    linked = {l.entity_id for l in links}
    structure: dict[int, float] = {}
    index = query.state.passage_index
    for link in links:
        entity = view.entity(link.entity_id)
        hub = is_hub(view, link.entity_id)
        for pid in [] if hub else entity.passage_ids:
            if pid in index and index[pid] not in query.exclude:
                _keep_max(structure, index[pid], 0.3 * link.score)
        adjacency = view.nx[link.entity_id] if link.entity_id in view.nx else {}
        for other, data in adjacency.items():
            if hub and other not in linked:
                continue
            info: EdgeInfo = data["info"]
            strength = link.score * edge_strength(info.weight) + (0.5 if other in linked else 0.0)
            for rid in info.relation_ids:
                for pid in view.relation_by_id.passage_ids(rid):
                    if pid in index and index[pid] not in query.exclude:
                        _keep_max(structure, index[pid], strength)
    rows = list(structure)
    sims = similarities(query, rows)
    scored = sorted(
        (Candidate(row=r, score=float(s) + STRUCTURE_WEIGHT * structure[r],
                   components={"similarity": round(float(s), 4), "structure": round(structure[r], 4)})
         for r, s in zip(rows, sims)),
        key=lambda c: -c.score,
    )
    return OperatorResult("neighbour", scored[: query.plan.top_k])


def _keep_max(scores: dict[int, float], row: int, value: float) -> None:
    if value > scores.get(row, -1.0):
        scores[row] = value


# --------------------------------------------------------------------------------------------
# Path


@dataclass
class GraphPath:
    nodes: list[str]
    score: float
    description: str


def path(query: Query) -> OperatorResult:
    """O_p: the best short paths (<= max_hops edges) between linked entities; evidence is the
    passages behind each edge, and each path gets a one-line description."""
    view = view_for(query)
    ends = [l.entity_id for l in strong_links(query.analysis) if l.entity_id in view.nx][:MAX_PATH_ENDPOINTS]
    visible = visible_relations(view, query)
    found: list[tuple[list[str], float]] = []
    bridge_values: dict[int, float] = {}
    for a, b in itertools.combinations(dict.fromkeys(ends), 2):
        found += paths_between(view, a, b, query.plan.max_hops, query.plan.max_paths, query.vector, visible,
                               bridge_values)
    found.sort(key=lambda p: -p[1])
    chosen = [_describe(view, nodes, score, visible) for nodes, score in found[: query.plan.max_paths]]
    candidates: dict[int, Candidate] = {}
    hints = []
    for gp in chosen:
        rows_of_path: list[str] = []
        for u, v in zip(gp.nodes, gp.nodes[1:]):
            pids = [pid for rid in visible(u, v) for pid in view.relation_by_id.passage_ids(rid)]
            for row, sim in best_rows(query, pids, PASSAGES_PER_EDGE):
                score = sim + STRUCTURE_WEIGHT * gp.score
                cand = candidates.get(row)
                if cand is None or score > cand.score:
                    candidates[row] = cand = Candidate(
                        row=row, score=score, paths=cand.paths if cand else [],
                        components={"similarity": round(sim, 4), "path": round(gp.score, 4)})
                if gp.description not in cand.paths:
                    cand.paths.append(gp.description)
                rows_of_path.append(query.state.passages[row].passage_id)
        hints.append(Hint(kind="path", text=gp.description, score=round(gp.score, 4),
                          passage_ids=list(dict.fromkeys(rows_of_path))))
    return OperatorResult("path", sorted(candidates.values(), key=lambda c: -c.score), hints)


def visible_relations(view: GraphView, query: Query):
    """edge (u, v) -> the ids of its relations that some visible passage states (all of them
    when nothing is hidden)."""
    if not query.exclude:
        return lambda u, v: view.nx[u][v]["info"].relation_ids
    hidden = {query.state.passages[r].passage_id for r in query.exclude}

    def visible(u: str, v: str) -> list[str]:
        return [rid for rid in view.nx[u][v]["info"].relation_ids
                if any(pid not in hidden for pid in view.relation_by_id.passage_ids(rid))]

    return visible


def paths_between(view: GraphView, a: str, b: str, max_hops: int, k: int, qvec: np.ndarray,
                  visible=None, bridge_values: dict[int, float] | None = None) -> list[tuple[list[str], float]]:
    """The k best simple paths a..b of at most `max_hops` edges, by bounded enumeration.

    Longer paths are only looked for when shorter ones do not already give k. A path's score is
    the geometric mean of its edge strengths, times 0.85 per extra hop, times how relevant and
    specific its middle entities are (a hub like "man" is a poor bridge). `visible(u, v)`, when
    given, names the usable relations of an edge; an edge with none is not crossed.
    `bridge_values` keeps each middle entity's value across the calls of one question.
    """
    g = view.nx
    if a == b or a not in g or b not in g:
        return []
    paths: list[list[str]] = []
    if g.has_edge(a, b):
        paths.append([a, b])
    nb_b = set(g[b])
    if max_hops >= 2 and len(paths) < k:
        # in the graph's own order, not a set's: string hashes change with every process
        paths += [[a, x, b] for x in g[a] if x in nb_b and x not in (a, b)]
    if max_hops >= 3 and len(paths) < k:
        heavy = sorted(g[a], key=lambda x: -g[a][x]["info"].weight)[:MAX_BRANCH]
        for x in heavy:
            if x == b:
                continue
            for y in g[x]:
                if y in nb_b and y not in (a, x, b):
                    paths.append([a, x, y, b])
    if visible is not None:
        paths = [p for p in paths if all(visible(u, v) for u, v in zip(p, p[1:]))]
    values = {} if bridge_values is None else bridge_values
    scored = [(p, _path_score(view, p, qvec, values)) for p in paths]
    scored.sort(key=lambda t: -t[1])
    return scored[:k]


def _path_score(view: GraphView, nodes: list[str], qvec: np.ndarray, bridge_values: dict[int, float]) -> float:
    strengths = [edge_strength(view.nx[u][v]["info"].weight) for u, v in zip(nodes, nodes[1:])]
    score = math.exp(sum(math.log(max(s, 1e-6)) for s in strengths) / len(strengths))
    score *= 0.85 ** (len(strengths) - 1)
    middle = [view.entity_row[n] for n in nodes[1:-1]]
    if middle:
        rel = [_bridge_value(view, r, qvec, bridge_values) for r in middle]
        score *= 0.5 + 0.5 * (sum(rel) / len(rel))
    return score


def _bridge_value(view: GraphView, row: int, qvec: np.ndarray, values: dict[int, float]) -> float:
    """How good a middle entity is as a bridge: half its relevance to the question, half its
    specificity (remembered: the paths of a question share their middles)."""
    if row not in values:
        values[row] = 0.5 * max(float(view.entity_vectors[row] @ qvec), 0.0) + 0.5 * float(view.specificity[row])
    return values[row]


def _describe(view: GraphView, nodes: list[str], score: float, visible) -> GraphPath:
    """"Syme —[recruited by]→ policeman ←[meets]— Gregory": the strongest visible relation per edge."""
    parts = [view.entity(nodes[0]).name]
    for u, v in zip(nodes, nodes[1:]):
        rels = [view.relation_by_id[r] for r in visible(u, v)]
        best = max(rels, key=lambda r: (r.kind == "svo", r.weight))
        label = best.label or best.kind
        arrow = f" —[{label}]→ " if best.source == u else f" ←[{label}]— "
        parts.append(arrow + view.entity(v).name)
    return GraphPath(nodes=nodes, score=score, description="".join(parts))


