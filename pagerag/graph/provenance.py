"""Provenance: every entity, relation and community points back to the passages it came from
(the paper's b: V ∪ E_g -> 2^T(D))."""
from __future__ import annotations

from ..records import Graph, Passage


def provenance_map(graph: Graph) -> dict[str, list[str]]:
    """Element id (entity, relation or community) -> the passage ids it came from."""
    out: dict[str, list[str]] = {}
    for e in graph.entities:
        out[e.entity_id] = list(e.passage_ids)
    for r in graph.relations:
        out[r.relation_id] = list(r.passage_ids)
    for c in graph.communities:
        out[c.community_id] = list(c.passage_ids)
    return out


def provenance_problems(graph: Graph, passages: list[Passage]) -> list[str]:
    """Elements with no provenance or with passage ids/evidence spans outside `passages` (empty = sound)."""
    known = {p.passage_id: p for p in passages}
    problems = [f"{eid}: no passages" for eid, pids in provenance_map(graph).items() if not pids]
    problems += [f"{eid}: unknown passage {pid}" for eid, pids in provenance_map(graph).items() for pid in pids if pid not in known]
    for r in graph.relations:
        for pid, start, end in r.evidence:
            p = known.get(pid)
            if p is None or end <= start or end <= p.start or start >= p.end:
                problems.append(f"{r.relation_id}: evidence span {pid}[{start}:{end}] is not in that passage")
    return problems
