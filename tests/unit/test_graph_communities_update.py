"""Communities after an add or remove (community_update.update_communities): the previous
communities kept with their ids, members and parents, the new entities placed in them or in new
ones; on small generated graphs."""
from __future__ import annotations

import random

from pagerag.graph.communities import detect_communities
from pagerag.graph.community_update import update_communities
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


def build(sizes: dict[str, int], bridges=(), seed: int = 0) -> tuple[Graph, list[Community]]:
    graph = groups_graph(sizes, bridges, seed)
    return graph, detect_communities(graph, SETTINGS)


def with_new(graph: Graph, name: str, ties: dict[str, int]) -> Graph:
    """The graph with one more entity, related to each of `ties` that many times."""
    graph.entities.append(Entity(name, name, "PERSON", [name], 1, [f"{name}:0"]))
    graph.relations += [Relation(f"{name}-{other}-{i}", name, other, "", "cooccurs", 1.0, [f"{name}:0"], [])
                        for other, n in ties.items() for i in range(n)]
    return graph


def as_tuples(communities: list[Community]) -> set[tuple]:
    return {(c.community_id, c.level, c.parent, tuple(c.entity_ids)) for c in communities}


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
    _, old = build({"a": 30, "b": 25}, bridges=[("a0", "b0")])
    after = groups_graph({"a": 30, "b": 25, "c": 20}, bridges=[("a0", "b0")])
    communities, placed = update_communities(after, SETTINGS, old)
    assert placed == 20
    assert_valid(after, communities)
    assert as_tuples(old) <= as_tuples(communities)
    assert any(c.level > 0 for c in old)  # subtrees were kept, not only top communities
    new = [c for c in communities if c.level == 0 and c.entity_ids[0].startswith("c")]
    assert new and all(c.community_id not in {o.community_id for o in old} for c in new)
    assert all(all(m.startswith("c") for m in c.entity_ids) for c in new)


def test_a_new_entity_joins_the_communities_of_what_it_is_tied_to_at_every_level():
    """Tied to one member of a group split into three levels: it joins that member's community at
    each level, keeping its id; every other community is as it was."""
    before, old = build({"a": 90, "b": 90})
    chain = sorted((c for c in old if "a3" in c.entity_ids), key=lambda c: c.level)
    assert len(chain) >= 3
    after = with_new(groups_graph({"a": 90, "b": 90}), "new", {"a3": 3})
    communities, placed = update_communities(after, SETTINGS, old)
    assert placed == 1
    assert_valid(after, communities)
    now = {c.community_id: c for c in communities}
    assert [now[c.community_id].entity_ids for c in chain] == [sorted([*c.entity_ids, "new"]) for c in chain]
    assert as_tuples([c for c in old if c not in chain]) <= as_tuples(communities)


def test_a_group_tied_by_one_edge_to_a_large_one_keeps_to_itself():
    """Modularity, not adjacency: twenty new entities related among themselves and one of them to
    a member of a 60-entity group form their own level-0 community."""
    _, old = build({"a": 60})
    after = groups_graph({"a": 60, "c": 20}, bridges=[("a0", "c0")])
    communities, _ = update_communities(after, SETTINGS, old)
    c_top = {c.community_id for c in communities if c.level == 0 for m in c.entity_ids if m.startswith("c")}
    a_top = {c.community_id for c in communities if c.level == 0 for m in c.entity_ids if m.startswith("a")}
    assert c_top.isdisjoint(a_top)


def test_a_community_that_grows_to_the_split_size_is_split():
    """A level-0 community of 9 with no children (below max_cluster_size = 10: a dense group of 8
    and c0, tied to it by one relation) gains five new entities tied to c0 alone: at 14 it is
    split as a build splits a community that large (the group apart from c0's star). (5 new in 14
    is over the default recluster_share: placed here all the same.)"""
    graph = groups_graph({"a": 8})
    graph.relations.append(Relation("c0-a0", "c0", "a0", "", "cooccurs", 1.0, ["c:0"], []))
    graph.entities.append(Entity("c0", "c0", "PERSON", ["c0"], 1, ["c:0"]))
    old = [Community("L0-0000", 0, None, sorted([f"a{i}" for i in range(8)] + ["c0"]), [])]
    for i in range(5):
        with_new(graph, f"z{i}", {"c0": 3})
    communities, placed = update_communities(graph, SETTINGS.model_copy(update={"recluster_share": 1.0}), old)
    assert placed == 5
    assert_valid(graph, communities)
    top = next(c for c in communities if c.community_id == "L0-0000")
    assert len(top.entity_ids) == 14
    children = sorted(sorted(c.entity_ids) for c in communities if c.parent == "L0-0000")
    assert children == [sorted(f"a{i}" for i in range(8)), ["c0", *(f"z{i}" for i in range(5))]]


def test_a_removal_takes_the_entities_out_and_keeps_the_rest():
    before, old = build({"a": 30, "b": 25, "c": 20}, bridges=[("a0", "b0")])
    after = groups_graph({"a": 30, "b": 25}, bridges=[("a0", "b0")])
    communities, placed = update_communities(after, SETTINGS, old)
    assert placed == 0
    assert_valid(after, communities)
    assert as_tuples(communities) == as_tuples([c for c in old if not c.entity_ids[0].startswith("c")])


def test_a_community_shrunk_below_the_split_size_loses_its_children():
    _, old = build({"a": 14, "b": 30})
    a_top = next(c for c in old if c.level == 0 and "a0" in c.entity_ids)
    assert any(c.parent == a_top.community_id for c in old)  # a group of 14 is split (max_cluster_size 10)
    after = groups_graph({"a": 14, "b": 30})
    gone = set(a_top.entity_ids[:6])
    after.entities = [e for e in after.entities if e.entity_id not in gone]
    after.relations = [r for r in after.relations if r.source not in gone and r.target not in gone]
    communities, _ = update_communities(after, SETTINGS, old)
    assert_valid(after, communities)
    shrunk = next(c for c in communities if c.community_id == a_top.community_id)
    assert len(shrunk.entity_ids) < SETTINGS.max_cluster_size
    assert not any(c.parent == shrunk.community_id for c in communities)


def test_with_nothing_before_it_is_the_build():
    graph = groups_graph({"a": 30, "b": 25})
    assert update_communities(graph, SETTINGS, [])[0] == detect_communities(graph, SETTINGS)


def test_an_update_is_deterministic():
    _, old = build({"a": 60, "b": 45, "d": 30}, bridges=[("a1", "b1"), ("b2", "d2")])
    after = groups_graph({"a": 60, "b": 47, "d": 30, "c": 25}, bridges=[("a1", "b1"), ("b2", "d2"), ("c0", "a5")])
    runs = [update_communities(after, SETTINGS, old) for _ in range(4)]
    assert all(run == runs[0] for run in runs)


def test_an_add_of_more_than_the_recluster_share_is_clustered_as_a_build():
    """25 new entities in 80 (31%) are over community.recluster_share (0.3): every community is
    recomputed; under a share of 0.35 they are placed."""
    _, old = build({"a": 30, "b": 25}, bridges=[("a0", "b0")])
    after = groups_graph({"a": 30, "b": 25, "c": 25}, bridges=[("a0", "b0"), ("c0", "a1")])
    communities, placed = update_communities(after, SETTINGS, old)
    assert (communities, placed) == (detect_communities(after, SETTINGS), 80)
    looser = SETTINGS.model_copy(update={"recluster_share": 0.35})
    communities, placed = update_communities(after, looser, old)
    assert placed == 25 and {c.community_id for c in old} <= {c.community_id for c in communities}
