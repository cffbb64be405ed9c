"""Provenance: every entity, relation and community points back to the passages it came from
(the paper's b: V ∪ E_g -> 2^T(D))."""
from __future__ import annotations

from typing import Any, Iterable

from ..records import Graph, Passage

Elements = Iterable[tuple[str, list[str]]]  # (element id, its passage ids)
Evidence = Iterable[tuple[str, list[list[Any]]]]  # (relation id, its [passage_id, start, end] spans)


def provenance_map(graph: Graph) -> dict[str, list[str]]:
    """Element id (entity, relation or community) -> the passage ids it came from."""
    return {eid: list(pids) for eid, pids in _elements(graph)}


def provenance_problems(graph: Graph, passages: list[Passage]) -> list[str]:
    """Elements with no provenance or with passage ids/evidence spans outside `passages` (empty = sound)."""
    # over the records' own lists, not provenance_map's copies (twice, they were ~0.1 GB of a
    # 26-book library's validation)
    return element_problems(_elements(graph), ((r.relation_id, r.evidence) for r in graph.relations), passages)


def element_problems(elements: Elements, evidence: Evidence, passages: list[Passage]) -> list[str]:
    """provenance_problems from the elements' passage ids and the relations' evidence alone (a
    stored graph's columns: its records need not be made to check it)."""
    known = {p.passage_id: p for p in passages}
    problems = []
    for eid, pids in elements:
        if not pids:
            problems.append(f"{eid}: no passages")
        problems += [f"{eid}: unknown passage {pid}" for pid in pids if pid not in known]
    for rid, spans in evidence:
        for pid, start, end in spans:
            p = known.get(pid)
            if p is None or end <= start or end <= p.start or start >= p.end:
                problems.append(f"{rid}: evidence span {pid}[{start}:{end}] is not in that passage")
    return problems


def _elements(graph: Graph):
    """(element id, its passage ids) of every entity, relation and community, the lists not copied."""
    yield from ((e.entity_id, e.passage_ids) for e in graph.entities)
    yield from ((r.relation_id, r.passage_ids) for r in graph.relations)
    yield from ((c.community_id, c.passage_ids) for c in graph.communities)
