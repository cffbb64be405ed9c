"""Stage 7: hierarchical Leiden communities over the (governed) graph, with provenance.

graspologic-native's `hierarchical_leiden` runs Leiden once, then re-runs it inside every cluster
larger than `max_cluster_size`, giving level-0 communities and finer level-1, 2, … children. The
edge list is sorted and the seed fixed, so a build is deterministic. Entities with no relation get
a level-0 community of their own. Ids are renumbered by (level, size, first member) so they do not
depend on the library's internal cluster numbers.

An add or remove keeps these communities and places its new entities in them
(community_update.py).
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Iterable

from ..records import Community, Graph
from ..settings import CommunitySettings

Edges = dict[tuple[str, str], float]


def edge_weights(relations: Iterable[tuple[str, str, float]], ids: set[str]) -> Edges:
    """(a, b) with a < b -> the summed weight of all relations between a and b (no self-loops, no
    dangling ends, no non-positive weights): what Leiden sees of a graph."""
    weights: Edges = defaultdict(float)
    for source, target, weight in relations:
        if source == target or source not in ids or target not in ids or weight <= 0:
            continue
        weights[(source, target) if source < target else (target, source)] += float(weight)
    return dict(weights)


def weighted_edges(graph: Graph) -> list[tuple[str, str, float]]:
    """Undirected edges (a < b) with the summed weight of all relations between a and b."""
    ids = {e.entity_id for e in graph.entities}
    weights = edge_weights(((r.source, r.target, r.weight) for r in graph.relations), ids)
    return [(a, b, w) for (a, b), w in sorted(weights.items())]


def _passage_sort_key(passage_id: str) -> list:
    """Natural order: "book-9" before "book-10"."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", passage_id)]


def detect_communities(graph: Graph, settings: CommunitySettings) -> list[Community]:
    """Hierarchical Leiden communities; each carries level, parent, entity ids and the union of
    its members' passage ids."""
    members, parent_of = hierarchical_leiden(weighted_edges(graph), settings)
    clustered = {node for nodes in members.values() for node in nodes}
    singletons = sorted(e.entity_id for e in graph.entities if e.entity_id not in clustered)
    return _as_communities(graph, members, parent_of, singletons)


def hierarchical_leiden(edges: list[tuple[str, str, float]], settings: CommunitySettings):
    """(level, leiden cluster) -> members and (level, leiden cluster) -> parent leiden cluster."""
    members: dict[tuple[int, int], list[str]] = defaultdict(list)
    parent_of: dict[tuple[int, int], int | None] = {}
    if edges:
        import graspologic_native as gn

        for item in gn.hierarchical_leiden(
            edges, resolution=settings.resolution,
            max_cluster_size=settings.max_cluster_size, seed=settings.seed, use_modularity=True,
            iterations=settings.iterations,
        ):
            members[(item.level, item.cluster)].append(item.node)
            parent_of[(item.level, item.cluster)] = item.parent_cluster
    return members, parent_of


def _as_communities(graph: Graph, members, parent_of, singletons: list[str]) -> list[Community]:
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
        communities.append(Community(cid, level, None, nodes, []))
    # Parents are one level up; their ids are known once every level has been numbered.
    for (level, nodes, key), community in zip(groups, communities):
        parent = parent_of.get(key) if key is not None else None
        if parent is not None and level > 0:
            community.parent = new_id.get((level - 1, parent))
    set_passages(graph, communities)
    return communities


def set_passages(graph: Graph, communities: list[Community]) -> None:
    """Each community's passages: the union of its members' (in the graph as it is now), in
    natural order. Each passage id's place in that order is found once: a library's communities
    name ~450k passage ids in all, ~13k distinct (sorting them by the key itself was 2.5 s of an
    add at 1,000 documents)."""
    by_id = {e.entity_id: e for e in graph.entities}
    distinct = {p for e in graph.entities for p in e.passage_ids}
    rank = {p: i for i, p in enumerate(sorted(distinct, key=_passage_sort_key))}.__getitem__
    for c in communities:
        c.passage_ids = sorted({p for n in c.entity_ids for p in by_id[n].passage_ids}, key=rank)


def flat_leiden(edges: list[tuple[str, str, float]], nodes: set[str], settings: CommunitySettings,
                total: float) -> list[list[str]]:
    """One Leiden partition of `nodes` (those without an edge alone). Modularity on a part of a
    graph measures against the part's own weight, which favours smaller communities the smaller
    the part: the resolution is scaled by part / `total` so that a community is weighed as it
    would be in the whole (`total`) of which the part was cut."""
    on_edges = set(n for a, b, _ in edges for n in (a, b))
    clusters: dict[int, list[str]] = defaultdict(list)
    if edges:
        import graspologic_native as gn

        part = sum(w for _, _, w in edges)
        _, labels = gn.leiden(edges, resolution=settings.resolution * part / total if total > 0 else settings.resolution,
                              seed=settings.seed, use_modularity=True, iterations=settings.iterations)
        for node, cluster in labels.items():
            clusters[cluster].append(node)
    return sorted([sorted(m) for m in clusters.values()] + [[n] for n in sorted(nodes - on_edges)])


def next_numbers(communities: list[Community]) -> dict[int, int]:
    """Per level, one past the highest number in the ids "L<level>-<number>" in use."""
    following: dict[int, int] = defaultdict(int)
    for c in communities:
        found = re.fullmatch(r"L(\d+)-(\d+)", c.community_id)
        if found and int(found.group(1)) == c.level:
            following[c.level] = max(following[c.level], int(found.group(2)) + 1)
    return following
