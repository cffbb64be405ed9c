"""Communities after an add or remove: the previous hierarchy kept, the new entities placed in it.

An entity that was in the library stays in its communities at every level; an entity that is
new joins the community that gains most modularity from it, level by level down the hierarchy,
or forms new communities with other new entities. Per level (the whole graph for level 0, a
community's own edges for its children, as hierarchical Leiden sees them):

1. Leiden on the new entities' edges among themselves groups them (a new book's characters start
   together, not one by one);
2. each new entity then moves, in passes until none moves, to the neighbouring community with
   the largest modularity gain k_i,C - resolution * k_i * total_C / 2m (Leiden's and Louvain's
   local moving), old entities held where they are;
3. a community that gained entities places them among its children the same way; one with no
   children that grew to max_cluster_size is split as a build splits it (hierarchical Leiden on
   its edges), and so is a new community that large.

A removed entity leaves its communities (an emptied one goes; one that fell below
max_cluster_size loses its children, which a build would not have made). Every community keeps its
id while it has members; new ones are numbered past every id used before, so an id never names
two communities in turn.

Why not Leiden again on the region the add touched, seeded with the previous communities (the
design until issue 30, docs/library.md): graspologic-native's `leiden` started from a partition
does not keep it, not even its own output (the 3,151-entity community of the 962-document
library: 3 of its 15 children came back as they were), and the entities an add touches lie in
most of a library's large communities, so an add of 50 documents to 912 made 1,433 of 2,511
governed communities again, and their summaries and summary vectors were the add's largest cost.
"""
from __future__ import annotations

from collections import defaultdict

from ..records import Community, Graph
from ..settings import CommunitySettings
from .communities import detect_communities, flat_leiden, hierarchical_leiden, next_numbers, set_passages, weighted_edges

PASSES = 10  # local-moving passes over the new entities (stops earlier when none moves)


def update_communities(graph: Graph, settings: CommunitySettings, previous: list[Community]) -> tuple[list[Community], int]:
    """The graph's communities from the previous version's, and how many entities were placed
    (the new ones). With no previous communities left, or more new entities than
    `settings.recluster_share` of the graph, this is `detect_communities` (every entity counted as
    placed)."""
    nodes = {e.entity_id for e in graph.entities}
    kept = _surviving(previous, nodes)
    before = {m for c in kept if c.level == 0 for m in c.entity_ids}
    new = sorted(nodes - before)
    if not before or len(new) > settings.recluster_share * len(nodes):
        return detect_communities(graph, settings), len(nodes)
    edges = weighted_edges(graph)
    placer = _Placer(kept, edges, settings, next_numbers(previous))
    placer.place(new, None, 0, None, sum(w for _, _, w in edges))
    communities = placer.result()
    communities.sort(key=lambda c: (c.level, -len(c.entity_ids), c.entity_ids[0]))
    set_passages(graph, communities)
    return communities, len(new)


def _surviving(communities: list[Community], nodes: set[str]) -> list[Community]:
    """The previous communities with their members still in the graph (fresh records; emptied
    ones and those under them dropped)."""
    out, alive = [], set()
    for c in sorted(communities, key=lambda c: c.level):
        members = [m for m in c.entity_ids if m in nodes]
        if members and (c.parent is None or c.parent in alive):
            out.append(Community(c.community_id, c.level, c.parent, members, []))
            alive.add(c.community_id)
    return out


class _Placer:
    def __init__(self, kept: list[Community], edges: list[tuple[str, str, float]], settings: CommunitySettings,
                 numbers: dict[int, int]):
        self.settings = settings
        self.numbers = numbers
        self.by_id = {c.community_id: c for c in kept}
        self.children: dict[str | None, list[Community]] = defaultdict(list)
        for c in kept:
            self.children[c.parent].append(c)
        self.adjacency: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for a, b, w in edges:
            self.adjacency[a].append((b, w))
            self.adjacency[b].append((a, w))
        self.degree = defaultdict(float, {n: sum(w for _, w in pairs) for n, pairs in self.adjacency.items()})  # whole graph
        self.grown: set[str] = set()  # communities that gained members (sorted again at the end)

    def place(self, new: list[str], parent: str | None, level: int, scope: set[str] | None, weight: float) -> None:
        """Place `new` (inside `scope`, the parent's members; None at level 0: the whole graph) among the
        parent's children at `level`, then go down into every child that gained members.
        `weight`: the edge weight inside the scope."""
        if not new:
            return
        children = self.children[parent]
        label = {m: i for i, c in enumerate(children) for m in c.entity_ids}
        groups = self._start_new(new, weight)
        for j, members in enumerate(groups):
            label.update((m, len(children) + j) for m in members)
        degree = self.degree if scope is None else {n: sum(w for o, w in self.adjacency[n] if o in scope) for n in scope}
        total = defaultdict(float)
        for n, group in label.items():
            total[group] += degree[n]
        self._move(new, label, degree, total, scope, 2 * weight)
        self._move_groups(new, len(children), label, degree, total, scope, 2 * weight)
        joined: dict[int, list[str]] = defaultdict(list)
        for n in new:
            joined[label[n]].append(n)
        for i, members in sorted(joined.items()):
            if i < len(children):
                self._grow(children[i], members)
            else:
                self._new_community(members, parent, level)

    def _start_new(self, new: list[str], weight: float) -> list[list[str]]:
        """The new entities grouped by Leiden on their edges among themselves."""
        inside = set(new)
        edges = sorted((a, b, w) for a in new for b, w in self.adjacency[a] if a < b and b in inside)
        return flat_leiden(edges, inside, self.settings, weight)

    def _move(self, movers: list[str], label: dict[str, int], degree: dict[str, float], total: dict[int, float],
              scope: set[str] | None, two_m: float) -> None:
        """Local moving of `movers` only: each to the neighbouring group of largest modularity gain."""
        if two_m <= 0:
            return
        resolution = self.settings.resolution
        for _ in range(PASSES):
            moved = False
            for n in movers:
                here, k = label[n], degree[n]
                links: dict[int, float] = defaultdict(float)
                for other, w in self.adjacency[n]:
                    if other != n and (scope is None or other in scope) and other in label:
                        links[label[other]] += w
                total[here] -= k
                best, best_gain = here, links.get(here, 0.0) - resolution * k * total[here] / two_m
                for group, k_in in sorted(links.items()):
                    gain = k_in - resolution * k * total[group] / two_m
                    if gain > best_gain + 1e-12:
                        best, best_gain = group, gain
                total[best] += k
                if best != here:
                    label[n], moved = best, True
            if not moved:
                return

    def _move_groups(self, new: list[str], first: int, label: dict[str, int], degree: dict[str, float],
                     total: dict[int, float], scope: set[str] | None, two_m: float) -> None:
        """Each group of new entities alone (label `first` on), as one unit, to the neighbouring
        community of largest positive modularity gain (Louvain's next level, for the new groups
        only): a few new entities tied together and to an old community go to it together."""
        if two_m <= 0:
            return
        resolution = self.settings.resolution
        for _ in range(PASSES):
            groups: dict[int, list[str]] = defaultdict(list)
            for n in new:
                if label[n] >= first:
                    groups[label[n]].append(n)
            moved = False
            for group, members in sorted(groups.items()):
                inside = set(members)
                k = sum(degree[n] for n in members)
                links: dict[int, float] = defaultdict(float)
                for n in members:
                    for other, w in self.adjacency[n]:
                        if other not in inside and (scope is None or other in scope) and other in label:
                            links[label[other]] += w
                best, best_gain = group, 0.0
                for target, k_in in sorted(links.items()):
                    gain = k_in - resolution * k * total[target] / two_m
                    if gain > best_gain + 1e-12:
                        best, best_gain = target, gain
                if best != group:
                    total[group] -= k
                    total[best] += k
                    for n in members:
                        label[n] = best
                    moved = True
            if not moved:
                return

    def _grow(self, community: Community, members: list[str]) -> None:
        """An existing community gains `members`: placed among its children, or, with none, split
        once it reaches max_cluster_size."""
        community.entity_ids = community.entity_ids + members
        self.grown.add(community.community_id)
        inside = set(community.entity_ids)
        weight = sum(w for n in inside for other, w in self.adjacency[n] if other in inside) / 2
        if self.children[community.community_id]:
            self.place(sorted(members), community.community_id, community.level + 1, inside, weight)
        elif len(inside) >= self.settings.max_cluster_size:
            self._split(community)

    def _new_community(self, members: list[str], parent: str | None, level: int) -> None:
        community = Community(self._number(level), level, parent, sorted(members), [])
        self.by_id[community.community_id] = community
        self.children[parent].append(community)
        if len(members) >= self.settings.max_cluster_size:
            self._split(community)

    def _split(self, community: Community) -> None:
        """Children for a community with none, as hierarchical Leiden makes them in a build; none
        when Leiden leaves it whole."""
        inside = set(community.entity_ids)
        edges = sorted((a, b, w) for a in inside for b, w in self.adjacency[a] if a < b and b in inside)
        members, parent_of = hierarchical_leiden(edges, self.settings)
        while len([key for key in members if key[0] == 0]) == 1:  # left whole (but for members with no edge in
            # it): the next level, if any, is the split; a child like its parent would be made again as it grows
            members = {(d - 1, c): n for (d, c), n in members.items() if d > 0}
            parent_of = {(d - 1, c): p for (d, c), p in parent_of.items() if d > 0}
        if not members:
            return
        named: dict[tuple[int, int], str] = {}
        for (depth, cluster), nodes in sorted(members.items(), key=lambda kv: (kv[0][0], -len(kv[1]), min(kv[1]))):
            parent = community.community_id if depth == 0 else named[(depth - 1, parent_of[(depth, cluster)])]
            child = Community(self._number(community.level + 1 + depth), community.level + 1 + depth, parent,
                              sorted(nodes), [])
            named[(depth, cluster)] = child.community_id
            self.by_id[child.community_id] = child
            self.children[parent].append(child)
        placed = {n for (depth, _), nodes in members.items() if depth == 0 for n in nodes}
        for n in sorted(inside - placed):  # no edge inside the community: a child of its own
            self._new_community([n], community.community_id, community.level + 1)

    def _number(self, level: int) -> str:
        number = self.numbers.get(level, 0)
        self.numbers[level] = number + 1
        return f"L{level}-{number:04d}"

    def result(self) -> list[Community]:
        """Every community; none under one smaller than max_cluster_size (a removal shrank it:
        a build would not have split it)."""
        out: list[Community] = []
        stack = list(reversed(self.children[None]))
        while stack:
            c = stack.pop()
            if c.community_id in self.grown:
                c.entity_ids = sorted(c.entity_ids)
            out.append(c)
            if len(c.entity_ids) >= self.settings.max_cluster_size:
                stack.extend(reversed(self.children[c.community_id]))
        return out
