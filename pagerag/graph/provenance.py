"""Provenance: every entity, relation and community points back to the passages it came from
(the paper's b: V ∪ E_g -> 2^T(D))."""
from __future__ import annotations

from ..records import Graph, Passage


def provenance_map(graph: Graph) -> dict[str, list[str]]:
    """Element id (entity, relation or community) -> the passage ids it came from."""
    return {eid: list(pids) for eid, pids in _elements(graph)}


def provenance_problems(graph: Graph, passages: list[Passage]) -> list[str]:
    """Elements with no provenance or with passage ids/evidence spans outside `passages` (empty = sound)."""
    known = {p.passage_id: p for p in passages}
    # over the records' own lists, not provenance_map's copies (twice, they were ~0.1 GB of a
    # 26-book library's validation)
    problems = [f"{eid}: no passages" for eid, pids in _elements(graph) if not pids]
    problems += [f"{eid}: unknown passage {pid}" for eid, pids in _elements(graph) for pid in pids if pid not in known]
    for r in graph.relations:
        for pid, start, end in r.evidence:
            p = known.get(pid)
            if p is None or end <= start or end <= p.start or start >= p.end:
                problems.append(f"{r.relation_id}: evidence span {pid}[{start}:{end}] is not in that passage")
    return problems


def _elements(graph: Graph):
    """(element id, its passage ids) of every entity, relation and community, the lists not copied."""
    yield from ((e.entity_id, e.passage_ids) for e in graph.entities)
    yield from ((r.relation_id, r.passage_ids) for r in graph.relations)
    yield from ((c.community_id, c.passage_ids) for c in graph.communities)
