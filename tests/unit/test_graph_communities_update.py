"""Communities after an add or remove (update_communities): Leiden again on the touched region
only, every other community kept with its id, members and parent; on small generated graphs."""
from __future__ import annotations

import random

from pagerag.graph.communities import Partition, detect_communities, edge_weights, touched_region, update_communities
from pagerag.records import Community, Entity, Graph, Relation
from pagerag.settings import CommunitySettings

SETTINGS = CommunitySettings(max_cluster_size=10)  # small: the groups below split into a level 1


def groups_graph(sizes: dict[str, int], bridges=(), seed: int = 0) -> Graph:
    """Dense random groups (a0..a29, b0..b24, …; each pair related with p = 0.3, the same edges
    for a group whatever the others) joined by the given bridges."""
    entities, relations = [], []
    for group, size in sizes.items():
        rnd = random.Random(f"{seed}{group}")
        names = [f"{group}{i}" for i in range(size)]
        entities += [Entity(n, n, "PERSON", [n], 1, [f"{group}:{i % 3}"]) for i, n in enumerate(names)]
        relations += [Relation(f"r{a}-{b}", a, b, "", "cooccurs", 1.0, [f"{group}:0"], [])
                      for i, a in enumerate(names) for b in names[i + 1:] if rnd.random() < 0.3]
    relations += [Relation(f"x{a}-{b}", a, b, "", "cooccurs", 1.0, ["x:0"], []) for a, b in bridges]
    return Graph(entities=entities, relations=relations)


def partition_of(graph: Graph) -> tuple[Partition, list[Community]]:
    communities = detect_communities(graph, SETTINGS)
    ids = {e.entity_id for e in graph.entities}
    return Partition(communities, edge_weights(((r.source, r.target, r.weight) for r in graph.relations), ids)), communities


def assert_valid(graph: Graph, communities: list[Community]) -> None:
    """Unique ids; level 0 partitions the entities; every child sits inside its parent one level up."""
    by_id = {c.community_id: c for c in communities}
    assert len(by_id) == len(communities)
    level0 = sorted(m for c in communities if c.level == 0 for m in c.entity_ids)
    assert level0 == sorted(e.entity_id for e in graph.entities)
    for c in communities:
        if c.level == 0:
            assert c.parent is None
        else:
            parent = by_id[c.parent]
            assert parent.level == c.level - 1 and set(c.entity_ids) <= set(parent.entity_ids)


def test_an_unrelated_group_leaves_every_community_as_it_was():
    before = groups_graph({"a": 30, "b": 25}, bridges=[("a0", "b0")])
    previous, old = partition_of(before)
    after = groups_graph({"a": 30, "b": 25, "c": 20}, bridges=[("a0", "b0")])
    communities, region = update_communities(after, SETTINGS, previous)
    assert region == 20  # the new group alone was clustered
    assert_valid(after, communities)
    kept = {(c.community_id, c.level, c.parent, tuple(c.entity_ids)) for c in communities}
    assert {(c.community_id, c.level, c.parent, tuple(c.entity_ids)) for c in old} <= kept
    assert any(c.level > 0 for c in old)  # subtrees were kept, not only top communities
    new = [c for c in communities if c.level == 0 and c.entity_ids[0].startswith("c")]
    assert new and all(c.community_id not in {o.community_id for o in old} for c in new)


def test_a_bridge_reclusters_the_two_communities_it_joins_and_keeps_the_rest():
    before = groups_graph({"a": 30, "b": 25, "d": 15})
    previous, old = partition_of(before)
    after = groups_graph({"a": 30, "b": 25, "d": 15, "c": 20}, bridges=[("c1", "b3")])
    nodes = {e.entity_id for e in after.entities}
    region = touched_region(nodes, edge_weights(((r.source, r.target, r.weight) for r in after.relations), nodes), previous)
    assert {f"b{i}" for i in range(25)} <= region  # b3's whole previous community
    assert not any(n.startswith(("a", "d")) for n in region)
    communities, _ = update_communities(after, SETTINGS, previous)
    assert_valid(after, communities)
    untouched = [c for c in old if c.entity_ids[0][0] in "ad"]
    assert untouched and all(c in communities for c in untouched)


def test_a_removal_reclusters_the_communities_that_lost_members():
    before = groups_graph({"a": 30, "b": 25, "c": 20}, bridges=[("c1", "b3")])
    previous, old = partition_of(before)
    after = groups_graph({"a": 30, "b": 25})
    communities, region = update_communities(after, SETTINGS, previous)
    assert_valid(after, communities)
    assert not any(m.startswith("c") for c in communities for m in c.entity_ids)
    assert all(c in communities for c in old if c.entity_ids[0].startswith("a"))
    assert region == 25  # b lost its bridge: its community again; a kept


def test_when_everything_is_touched_it_is_the_build():
    before = groups_graph({"a": 12})
    previous, _ = partition_of(before)
    after = groups_graph({"a": 12, "b": 8}, bridges=[("a0", "b0")] + [(f"a{i}", "b1") for i in range(12)])
    communities, region = update_communities(after, SETTINGS, previous)
    assert region == 20 and communities == detect_communities(after, SETTINGS)


def test_inside_a_large_community_the_finer_communities_without_a_change_are_kept():
    """A new entity tied to one member of a split community: the community is clustered again at
    level 0 (and grows by it), but of its level-1 children only the changed one is made again."""
    before = groups_graph({"a": 30, "b": 25})
    previous, old = partition_of(before)
    after = groups_graph({"a": 30, "b": 25})
    after.entities.append(Entity("new", "new", "PERSON", ["new"], 1, ["new:0"]))
    after.relations += [Relation(f"n{i}", "new", "b3", "", "cooccurs", 1.0, ["new:0"], []) for i in range(2)]
    communities, region = update_communities(after, SETTINGS, previous)
    assert_valid(after, communities)
    assert region == 26  # b's level-0 community and the new entity
    b_children = [c for c in old if c.level == 1 and c.entity_ids[0].startswith("b")]
    unchanged = [c for c in b_children if "b3" not in c.entity_ids]
    now = {c.community_id: c for c in communities}
    assert unchanged and all(now[c.community_id].entity_ids == c.entity_ids for c in unchanged)
    b_top = next(c for c in communities if c.level == 0 and "b3" in c.entity_ids)
    assert "new" in b_top.entity_ids and all(now[c.community_id].parent == b_top.community_id for c in unchanged)
    assert all(c in communities for c in old if c.entity_ids[0].startswith("a"))  # a's whole subtree


def test_an_update_is_deterministic():
    before = groups_graph({"a": 60, "b": 45, "d": 30}, bridges=[("a1", "b1"), ("b2", "d2")])
    previous, _ = partition_of(before)
    after = groups_graph({"a": 60, "b": 47, "d": 30, "c": 25}, bridges=[("a1", "b1"), ("b2", "d2"), ("c0", "a5")])
    runs = [update_communities(after, SETTINGS, previous) for _ in range(4)]
    assert all(run == runs[0] for run in runs)


def test_below_level_one_the_finer_communities_without_a_change_are_kept_too():
    """Three levels: a new entity tied to one member; every previous community of level 2 or
    deeper without that member keeps its id and members (an add used to find the level-2
    communities of a re-clustered level-1 one afresh), and the new entity is in one community
    per level from 0 down."""
    before = groups_graph({"a": 90, "b": 90})
    previous, old = partition_of(before)
    assert any(c.level == 2 for c in old)
    after = groups_graph({"a": 90, "b": 90})
    after.entities.append(Entity("new", "new", "PERSON", ["new"], 1, ["new:0"]))
    after.relations += [Relation(f"n{i}", "new", "a3", "", "cooccurs", 1.0, ["new:0"], []) for i in range(2)]
    communities, _ = update_communities(after, SETTINGS, previous)
    assert_valid(after, communities)
    now = {c.community_id: c for c in communities}
    deep = [c for c in old if c.level >= 2 and "a3" not in c.entity_ids]  # the code before lost 6 of 33
    assert all(c.community_id in now and now[c.community_id].entity_ids == c.entity_ids for c in deep)
    changed = [c for c in communities if "new" in c.entity_ids]
    assert [c.level for c in sorted(changed, key=lambda c: c.level)] == list(range(len(changed)))


def test_a_starting_community_cut_in_two_does_not_stop_leiden():
    """graspologic-native's leiden panicked on a starting community that is not connected (a
    previous community with its middle taken out): it starts from the connected parts instead."""
    from pagerag.graph.communities import _flat_leiden

    edges = [("a", "c", 1.0), ("b", "c", 1.0)]
    seeds = {"a": 0, "b": 0, "c": 1}  # 0 = {a, b}, joined only through c (found by a search of small graphs)
    clusters = _flat_leiden(edges, {"a", "b", "c", "d"}, seeds | {"d": 2}, SETTINGS, 2.0)
    assert sorted(n for c in clusters for n in c) == ["a", "b", "c", "d"] and ["d"] in clusters
