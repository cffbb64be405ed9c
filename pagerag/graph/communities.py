"""Stage 7: hierarchical Leiden communities over the (governed) graph, with provenance.

graspologic-native's `hierarchical_leiden` runs Leiden once, then re-runs it inside every cluster
larger than `max_cluster_size`, giving level-0 communities and finer level-1, 2, … children. The
edge list is sorted and the seed fixed, so a build is deterministic. Entities with no relation get
a level-0 community of their own. Ids are renumbered by (level, size, first member) so they do not
depend on the library's internal cluster numbers.
"""
from __future__ import annotations

import re
from collections import defaultdict

from ..records import Community, Graph
from ..settings import CommunitySettings


def weighted_edges(graph: Graph) -> list[tuple[str, str, float]]:
    """Undirected edges (a < b) with the summed weight of all relations between a and b."""
    ids = {e.entity_id for e in graph.entities}
    weights: dict[tuple[str, str], float] = defaultdict(float)
    for r in graph.relations:
        if r.source == r.target or r.source not in ids or r.target not in ids or r.weight <= 0:
            continue
        weights[(min(r.source, r.target), max(r.source, r.target))] += float(r.weight)
    return [(a, b, w) for (a, b), w in sorted(weights.items())]


def _passage_sort_key(passage_id: str) -> list:
    """Natural order: "book-9" before "book-10"."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", passage_id)]


def detect_communities(graph: Graph, settings: CommunitySettings) -> list[Community]:
    """Hierarchical Leiden communities; each carries level, parent, entity ids and the union of
    its members' passage ids."""
    edges = weighted_edges(graph)
    # (level, leiden cluster) -> members; leiden cluster -> (level, parent leiden cluster)
    members: dict[tuple[int, int], list[str]] = defaultdict(list)
    parent_of: dict[tuple[int, int], int | None] = {}
    if edges:
        import graspologic_native as gn

        for item in gn.hierarchical_leiden(
            edges, resolution=settings.resolution, max_cluster_size=settings.max_cluster_size,
            seed=settings.seed, use_modularity=True, iterations=settings.iterations,
        ):
            members[(item.level, item.cluster)].append(item.node)
            parent_of[(item.level, item.cluster)] = item.parent_cluster
    clustered = {node for nodes in members.values() for node in nodes}
    singletons = sorted(e.entity_id for e in graph.entities if e.entity_id not in clustered)
    return _as_communities(graph, members, parent_of, singletons)


def _as_communities(graph: Graph, members, parent_of, singletons: list[str]) -> list[Community]:
    by_id = {e.entity_id: e for e in graph.entities}
    groups = [(key[0], sorted(nodes), key) for key, nodes in members.items()]
    groups += [(0, [node], None) for node in singletons]
    groups.sort(key=lambda g: (g[0], -len(g[1]), g[1][0]))
    new_id: dict[tuple[int, int], str] = {}
    counters: dict[int, int] = defaultdict(int)
    communities: list[Community] = []
    for level, nodes, key in groups:
        cid = f"L{level}-{counters[level]:04d}"
        counters[level] += 1
        if key is not None:
            new_id[key] = cid
        passages = sorted({p for n in nodes for p in by_id[n].passage_ids}, key=_passage_sort_key)
        communities.append(Community(cid, level, None, nodes, passages))
    # Parents are one level up; their ids are known once every level has been numbered.
    for (level, nodes, key), community in zip(groups, communities):
        parent = parent_of.get(key) if key is not None else None
        if parent is not None and level > 0:
            community.parent = new_id.get((level - 1, parent))
    return communities
