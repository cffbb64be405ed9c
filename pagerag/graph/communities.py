"""Stage 7: hierarchical Leiden communities over the (governed) graph, with provenance.

graspologic-native's `hierarchical_leiden` runs Leiden once, then re-runs it inside every cluster
larger than `max_cluster_size`, giving level-0 communities and finer level-1, 2, … children. The
edge list is sorted and the seed fixed, so a build is deterministic. Entities with no relation get
a level-0 community of their own. Ids are renumbered by (level, size, first member) so they do not
depend on the library's internal cluster numbers.

An add or remove (`update_communities`) re-runs Leiden only on the region the change touched: the
entities that are new or whose weighted edges changed (so a new entity's neighbours too), and
every member of the previous level-0 communities those belong to (or that lost a member), seeded
with the previous partition. Every other level-0 community keeps its members, its id and its
whole subtree of finer communities, so its summary is reused and a question about it reads what
it read before. Inside a re-clustered community, the previous communities one level down with no
changed member are kept too, at every level; only the rest is split again, seeded with its
previous communities.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..records import Community, Graph
from ..settings import CommunitySettings

Edges = dict[tuple[str, str], float]


@dataclass
class Partition:
    """A published version's communities and the weighted edges (`edge_weights`) they were found on."""

    communities: list[Community]
    edges: Edges


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
    members, parent_of = _hierarchical_leiden(weighted_edges(graph), settings)
    clustered = {node for nodes in members.values() for node in nodes}
    singletons = sorted(e.entity_id for e in graph.entities if e.entity_id not in clustered)
    return _as_communities(graph, members, parent_of, singletons)


def _hierarchical_leiden(edges: list[tuple[str, str, float]], settings: CommunitySettings,
                         seeds: dict[str, int] | None = None):
    """(level, leiden cluster) -> members and (level, leiden cluster) -> parent leiden cluster."""
    members: dict[tuple[int, int], list[str]] = defaultdict(list)
    parent_of: dict[tuple[int, int], int | None] = {}
    if edges:
        import graspologic_native as gn

        for item in gn.hierarchical_leiden(
            edges, starting_communities=seeds, resolution=settings.resolution,
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
    _set_passages(graph, communities)
    return communities


def _set_passages(graph: Graph, communities: list[Community]) -> None:
    """Each community's passages: the union of its members' (in the graph as it is now), in
    natural order. Each passage id's place in that order is found once: a library's communities
    name ~450k passage ids in all, ~13k distinct (sorting them by the key itself was 2.5 s of an
    add at 1,000 documents)."""
    distinct = sorted({p for e in graph.entities for p in e.passage_ids}, key=_passage_sort_key)
    rank = {p: i for i, p in enumerate(distinct)}
    # each member's passages as ranks, joined and made unique per community in numpy: the
    # level-0 giants hold thousands of members (0.3 s of an add at 1,000 documents as Python sets)
    ranks = {e.entity_id: np.fromiter(map(rank.__getitem__, e.passage_ids), np.int64, len(e.passage_ids))
             for e in graph.entities}
    for c in communities:
        found = np.unique(np.concatenate([ranks[n] for n in c.entity_ids])) if c.entity_ids else ()
        c.passage_ids = [distinct[i] for i in found.tolist()] if len(found) else []


# --------------------------------------------------------------------------------------------
# An add or remove: Leiden again on the touched region only


def update_communities(graph: Graph, settings: CommunitySettings, previous: Partition,
                       hops: int = 0) -> tuple[list[Community], int]:
    """The graph's communities after an add or remove, from the previous version's, and how many
    entities were clustered again: the touched region (`touched_region`) is clustered again,
    seeded with its previous level-0 communities; every other community is kept with its id,
    members and parent, and so are the unchanged level-1 subtrees of a re-clustered community that
    continues a previous one (`_split`). When the region is the whole graph (or there was nothing before) this is
    `detect_communities`, a build's result."""
    edges = weighted_edges(graph)
    nodes = {e.entity_id for e in graph.entities}
    weights = {(a, b): w for a, b, w in edges}
    changed = changed_nodes(nodes, weights, previous)
    region = _grown(changed, nodes, weights, previous, hops)
    if not previous.communities or region >= nodes:
        return detect_communities(graph, settings), len(nodes)
    kept, dropped = _split_previous(previous.communities, region, nodes)
    inside = [e for e in edges if e[0] in region and e[1] in region]
    groups, revived = _recluster(inside, region, dropped, changed, settings, sum(w for _, _, w in edges))
    communities = kept + _name_communities(groups, dropped, kept, revived)
    communities.sort(key=lambda c: (c.level, -len(c.entity_ids), c.entity_ids[0]))
    _set_passages(graph, communities)
    return communities, len(region)


def changed_nodes(nodes: set[str], edges: Edges, previous: Partition) -> set[str]:
    """Entities that are new or whose weighted edges are not what the previous version's were
    (either end of an edge that appeared, went or changed weight); removed entities are not in
    the graph any more, so they are not here, but their neighbours are."""
    before = {m for c in previous.communities if c.level == 0 for m in c.entity_ids}
    changed = nodes - before
    for pair in edges.keys() ^ previous.edges.keys():
        changed.update(pair)
    for pair in edges.keys() & previous.edges.keys():
        if not math.isclose(edges[pair], previous.edges[pair], rel_tol=1e-9):
            changed.update(pair)
    return changed & nodes


def touched_region(nodes: set[str], edges: Edges, previous: Partition, hops: int = 0) -> set[str]:
    """The entities Leiden sees again: the changed ones (which include every neighbour of a new
    entity: their edges changed too), `hops` steps of neighbours further, grown to whole previous
    level-0 communities (a community is re-clustered whole or kept whole) and to every community
    that lost a member. hops = 0: a neighbour of a changed old entity is not taken in for that
    alone: an add changes the edges of common nouns ("man", "night"), whose neighbours are most of
    a library (measured: docs/library.md)."""
    return _grown(changed_nodes(nodes, edges, previous), nodes, edges, previous, hops)


def _grown(changed: set[str], nodes: set[str], edges: Edges, previous: Partition, hops: int) -> set[str]:
    """touched_region from the changed entities."""
    touched = set(changed)
    for _ in range(hops):
        frontier = set(touched)
        for a, b in edges:
            if a in frontier:
                touched.add(b)
            if b in frontier:
                touched.add(a)
    region = set(touched)
    for c in previous.communities:
        if c.level == 0 and (not touched.isdisjoint(c.entity_ids) or not nodes.issuperset(c.entity_ids)):
            region.update(m for m in c.entity_ids if m in nodes)
    return region


def _split_previous(communities: list[Community], region: set[str],
                    nodes: set[str]) -> tuple[list[Community], list[Community]]:
    """The previous communities outside the region (level-0 ones and their whole subtrees, as
    fresh records), and those in it or with a member gone (to be replaced). The region holds
    whole level-0 communities, so a subtree is on one side."""
    kept, dropped = [], []
    for c in communities:
        inside = not region.isdisjoint(c.entity_ids) or not nodes.issuperset(c.entity_ids) or not c.entity_ids
        (dropped if inside else kept).append(Community(c.community_id, c.level, c.parent, list(c.entity_ids), []))
    return kept, dropped


def _recluster(edges: list[tuple[str, str, float]], region: set[str], dropped: list[Community], changed: set[str],
               settings: CommunitySettings, total: float) -> tuple[list[tuple], list[Community]]:
    """Leiden on the region's own edges, starting from the region's previous level-0 communities
    (a new entity starts alone), then the finer levels of every cluster of max_cluster_size or
    more, as hierarchical Leiden makes them (`_split`). Returns (level, members, key, parent's key)
    groups and the previous finer communities kept whole inside them (their parents given as
    keys); region entities without an edge inside it get a community of their own. `total`: the
    whole graph's edge weight (see `_flat_leiden`)."""
    previous = _Previous(dropped)
    tops = _flat_leiden(edges, region, _seeds(region, previous.at_level(0)), settings, total)
    inner = _edges_within(tops, edges)
    groups: list[tuple] = []
    revived: list[Community] = []
    for i, members in enumerate(tops):
        groups.append((0, members, f"0:{i}", None))
        if len(members) >= settings.max_cluster_size:
            more, kept = _split(members, f"0:{i}", 0, previous, changed, inner[i], settings)
            groups += more
            revived += kept
    return groups, revived


class _Previous:
    """The replaced communities, found by level and member, and their children."""

    def __init__(self, communities: list[Community]):
        self.communities = communities
        self.where: dict[tuple[int, str], int] = {(c.level, m): i for i, c in enumerate(communities) for m in c.entity_ids}
        self.children: dict[str, list[Community]] = defaultdict(list)
        for c in communities:
            if c.parent is not None:
                self.children[c.parent].append(c)

    def at_level(self, level: int, members: Iterable[str] | None = None) -> list[Community]:
        """Those of `level` (with one of `members`, when given), in the previous version's order."""
        if members is None:
            return [c for c in self.communities if c.level == level]
        found = {self.where[(level, m)] for m in members if (level, m) in self.where}
        return [self.communities[i] for i in sorted(found)]

    def subtrees(self, roots: list[Community]) -> list[Community]:
        """The roots and every community below them."""
        out, stack = [], list(reversed(roots))
        while stack:
            c = stack.pop()
            out.append(c)
            stack.extend(reversed(self.children.get(c.community_id, [])))
        return out


def _edges_within(clusters: list[list[str]], edges: list[tuple[str, str, float]]) -> list[list[tuple[str, str, float]]]:
    """Per cluster, the edges with both ends in it (one pass over the edges, not one per cluster)."""
    where = {n: i for i, members in enumerate(clusters) for n in members}
    out: list[list[tuple[str, str, float]]] = [[] for _ in clusters]
    for e in edges:
        i = where.get(e[0])
        if i is not None and where.get(e[1]) == i:
            out[i].append(e)
    return out


def _flat_leiden(edges: list[tuple[str, str, float]], nodes: set[str], seeds: dict[str, int],
                 settings: CommunitySettings, total: float) -> list[list[str]]:
    """One Leiden partition of `nodes` (those without an edge alone), from the seeds. Modularity
    on a part of a graph measures against the part's own weight, which favours smaller
    communities the smaller the part: the resolution is scaled by part / `total` so that a
    community is weighed as it would be in the whole (`total`) of which the part was cut."""
    on_edges = list(dict.fromkeys(n for a, b, _ in edges for n in (a, b)))
    clusters: dict[int, list[str]] = defaultdict(list)
    if edges:
        import graspologic_native as gn

        # starting communities numbered 0..k-1 in order of appearance: with sparse numbers
        # graspologic-native's leiden gave another partition now and then on the same input
        # (1 run in 8 on a 413-entity part of the 5-book library), with these it did not
        numbers: dict[str, int] = {}
        groups = _connected_seeds(edges, seeds)
        start = {n: numbers.setdefault(groups[n], len(numbers)) for n in on_edges}
        part = sum(w for _, _, w in edges)
        _, labels = gn.leiden(edges, starting_communities=start,
                              resolution=settings.resolution * part / total if total > 0 else settings.resolution,
                              seed=settings.seed, use_modularity=True, iterations=settings.iterations)
        for node, cluster in labels.items():
            clusters[cluster].append(node)
    return sorted([sorted(m) for m in clusters.values()] + [[n] for n in sorted(nodes - set(on_edges))])


def _connected_seeds(edges: list[tuple[str, str, float]], seeds: dict[str, int]) -> dict[str, str]:
    """Each node's starting community cut to its connected part over `edges` (named by a member):
    graspologic-native's leiden panics ("index out of bounds") on a starting community that is
    not connected, which a previous community becomes inside a part of it (a union-find over the
    edges within each seed)."""
    parent: dict[str, str] = {}

    def find(n: str) -> str:
        root = n
        while parent.get(root, root) != root:
            root = parent[root]
        while n != root:
            parent[n], n = root, parent.get(n, n)
        return root

    for a, b, _ in edges:
        if seeds[a] == seeds[b]:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    return {n: find(n) for a, b, _ in edges for n in (a, b)}


def _seeds(nodes: set[str], previous: list[Community]) -> dict[str, int]:
    """Starting community of each node: the number of its previous community among `previous`,
    or one of its own (a new entity)."""
    seeds: dict[str, int] = {}
    for i, c in enumerate(previous):
        seeds.update((m, i) for m in c.entity_ids if m in nodes)
    for n in sorted(nodes - seeds.keys()):
        seeds[n] = len(previous) + len(seeds)
    return seeds


def _split(members: list[str], key: str, level: int, previous: _Previous, changed: set[str],
           whole: list[tuple[str, str, float]], settings: CommunitySettings) -> tuple[list[tuple], list[Community]]:
    """The finer levels below a cluster of `level` large enough to split, at every depth. Every
    previous community one level down that lies inside it, smaller than it, with no changed
    member, is kept whole (with its subtree) as one of its children; Leiden runs on the rest only,
    seeded with the rest's previous communities of that level (a build runs it on the whole
    cluster), and each child large enough is split the same way. (Only level 1 was kept so
    before: the children of a re-clustered level-1 community were found afresh.) A cluster
    Leiden leaves whole has no children, as in hierarchical Leiden. `whole`: the cluster's own
    edges."""
    inside = set(members)
    below = previous.at_level(level + 1, inside)
    kept = [c for c in below if len(c.entity_ids) < len(inside) and changed.isdisjoint(c.entity_ids)
            and inside.issuperset(c.entity_ids)]
    kept_ids = {c.community_id for c in kept}
    rest = inside.difference(*(c.entity_ids for c in kept))
    sub = [e for e in whole if e[0] in rest and e[1] in rest] if kept else whole
    clusters = _flat_leiden(sub, rest, _seeds(rest, [c for c in below if c.community_id not in kept_ids]), settings,
                            sum(w for _, _, w in whole))
    if not kept and len(clusters) == 1:
        return [], []
    groups: list[tuple] = []
    revived = previous.subtrees(kept)
    for i, (nodes, own) in enumerate(zip(clusters, _edges_within(clusters, sub))):
        child = f"{key}/{i}"
        groups.append((level + 1, nodes, child, key))
        if len(nodes) >= settings.max_cluster_size:
            more, again = _split(nodes, child, level + 1, previous, changed, own, settings)
            groups += more
            revived += again
    for c in kept:
        c.parent = key  # named once the cluster is
    return groups, revived


def _name_communities(groups, dropped: list[Community], kept: list[Community], revived: list[Community]) -> list[Community]:
    """Community records for the region's groups: a group with exactly the members (and level) of
    a replaced community keeps that id; any other gets the next number of its level, past every
    id the previous version used (so an id never names two different communities in turn). The
    revived previous communities keep theirs; those whose parent is a group's key get its id."""
    revived_ids = {c.community_id for c in revived}
    reuse = {(c.level, tuple(sorted(c.entity_ids))): c.community_id for c in dropped if c.community_id not in revived_ids}
    following = _next_numbers(dropped + kept)
    ids: dict[str, str] = {}
    out = []
    for level, nodes, key, parent in sorted(groups, key=lambda g: (g[0], -len(g[1]), g[1][0])):
        cid = reuse.get((level, tuple(nodes)))
        if cid is None:
            cid = f"L{level}-{following[level]:04d}"
            following[level] += 1
        if key is not None:
            ids[key] = cid
        out.append(Community(cid, level, parent, nodes, []))
    for c in out:  # parents are named once every level has been
        c.parent = ids.get(c.parent) if c.parent is not None else None
    for c in revived:
        c.parent = ids.get(c.parent, c.parent)
    return out + revived


def _next_numbers(communities: list[Community]) -> dict[int, int]:
    """Per level, one past the highest number in the ids "L<level>-<number>" in use."""
    following: dict[int, int] = defaultdict(int)
    for c in communities:
        found = re.fullmatch(r"L(\d+)-(\d+)", c.community_id)
        if found and int(found.group(1)) == c.level:
            following[c.level] = max(following[c.level], int(found.group(2)) + 1)
    return following


def inside_weights(communities: list[Community], row: dict[str, int], sources: np.ndarray, targets: np.ndarray,
                   weights: np.ndarray) -> list[dict[str, tuple[float, int]] | None]:
    """Per community, each member's summed weight of the edges to other members, and how many
    edges those are; the edges are (sources[i], targets[i], weights[i]) in the rows of `row`.
    One pass over the edges per level whose communities share no member, as Leiden's levels
    are partitions; None for every community of a level that shares members (its caller counts
    those one by one). Members not in `row` are left out. The query snapshot's member degrees
    and the summaries' content keys both read it: community by community, in Python, they were
    0.46 and 0.26 s of an add at 1,000 documents."""
    by_level: dict[int, list[int]] = defaultdict(list)
    for i, c in enumerate(communities):
        by_level[c.level].append(i)
    out: list[dict[str, tuple[float, int]] | None] = [None] * len(communities)
    for indices in by_level.values():
        owner = np.full(len(row), -1, np.int64)
        for i in indices:
            rows = [row[m] for m in dict.fromkeys(communities[i].entity_ids) if m in row]
            if (owner[rows] >= 0).any():
                break
            owner[rows] = i
        else:
            inside = (owner[sources] == owner[targets]) & (owner[sources] >= 0)
            total = np.zeros(len(row), np.float64)
            count = np.zeros(len(row), np.int64)
            for ends in (sources[inside], targets[inside]):
                np.add.at(total, ends, weights[inside])
                np.add.at(count, ends, 1)
            for i in indices:
                out[i] = {m: (float(total[row[m]]), int(count[row[m]])) for m in communities[i].entity_ids if m in row}
    return out
