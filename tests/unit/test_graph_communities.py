"""Hierarchical Leiden communities and extractive summaries on small hand-made graphs."""
from __future__ import annotations

from pagerag.graph.communities import detect_communities
from pagerag.graph.provenance import provenance_map, provenance_problems
from pagerag.graph.summaries import summarise_communities
from pagerag.records import Entity, Graph, Passage, Relation
from pagerag.settings import CommunitySettings

TEXTS = [
    "Scrooge counted coins while Marley watched. The fog was thick outside.",
    "Marley rattled his chain at Scrooge. Scrooge and Marley had been partners.",
    "Bob carried Tim home. Martha kissed Tim and Bob laughed.",
    "Martha and Bob set the table. Tim sang a song.",
    "Belle walked alone by the river.",
]
PASSAGES = []
_offset = 0
for _i, _t in enumerate(TEXTS):
    PASSAGES.append(Passage(f"p{_i}", "doc", "mem", _offset, _offset + len(_t), _t, 15, _i))
    _offset += len(_t) + 1


def two_clusters() -> Graph:
    def e(name, pids):
        return Entity(f"person:{name.lower()}", name, "PERSON", [name], 3, pids)

    entities = [e("Scrooge", ["p0", "p1"]), e("Marley", ["p0", "p1"]), e("Fog", ["p0"]),
                e("Bob", ["p2", "p3"]), e("Tim", ["p2", "p3"]), e("Martha", ["p2", "p3"]), e("Belle", ["p4"])]
    pairs = [("scrooge", "marley", 5), ("scrooge", "fog", 2), ("marley", "fog", 1),
             ("bob", "tim", 4), ("bob", "martha", 3), ("tim", "martha", 3), ("marley", "bob", 0.2)]
    relations = [Relation(f"r{i}", f"person:{a}", f"person:{b}", "co-occurs with", "cooccurs", w, ["p0"], [])
                 for i, (a, b, w) in enumerate(pairs)]
    return Graph(entities=entities, relations=relations)


def members(communities, level=0):
    return sorted(sorted(c.entity_ids) for c in communities if c.level == level)


def test_leiden_finds_the_two_groups_and_gives_isolates_their_own_community():
    communities = detect_communities(two_clusters(), CommunitySettings())
    assert members(communities) == [
        ["person:belle"], ["person:bob", "person:martha", "person:tim"], ["person:fog", "person:marley", "person:scrooge"],
    ]


def test_leiden_is_deterministic():
    graph = two_clusters()
    first = detect_communities(graph, CommunitySettings(seed=3))
    second = detect_communities(graph, CommunitySettings(seed=3))
    assert first == second  # ids, levels, parents, members and passages


def test_large_clusters_are_split_into_a_child_level_with_parents():
    # Three 4-cliques in a chain; a low resolution first lumps two of them together, and
    # max_cluster_size=5 makes Leiden split that lump again one level down.
    entities, relations = [], []
    for g in range(3):
        ids = [f"n{g}{i}" for i in range(4)]
        entities += [Entity(n, n.upper(), "PERSON", [], 2, [f"p{g}"]) for n in ids]
        relations += [Relation(f"r{a}{b}", a, b, "", "cooccurs", 1.0, [], []) for i, a in enumerate(ids) for b in ids[i + 1 :]]
    relations += [Relation("x1", "n03", "n10", "", "cooccurs", 0.5, [], []), Relation("x2", "n13", "n20", "", "cooccurs", 0.5, [], [])]
    settings = CommunitySettings(max_cluster_size=5, resolution=0.1, seed=42)
    communities = detect_communities(Graph(entities=entities, relations=relations), settings)
    by_id = {c.community_id: c for c in communities}
    children = [c for c in communities if c.level > 0]
    assert children, "expected a level-1 split"
    for child in children:
        parent = by_id[child.parent]
        assert parent.level == child.level - 1 and set(child.entity_ids) <= set(parent.entity_ids)
    assert all(c.parent is None for c in communities if c.level == 0)
    for parent_id in {c.parent for c in children}:
        split = [m for c in children if c.parent == parent_id for m in c.entity_ids]
        assert sorted(split) == sorted(by_id[parent_id].entity_ids)  # children partition the parent


def test_community_provenance_is_the_union_of_member_passages():
    graph = two_clusters()
    communities = detect_communities(graph, CommunitySettings())
    by_id = {e.entity_id: e for e in graph.entities}
    for c in communities:
        assert set(c.passage_ids) == {p for m in c.entity_ids for p in by_id[m].passage_ids}
    graph.communities = communities
    assert provenance_problems(graph, PASSAGES) == []
    mapping = provenance_map(graph)
    assert mapping["person:belle"] == ["p4"] and all(c.community_id in mapping for c in communities)


def test_extractive_summary_titles_central_members_and_quotes_their_sentences():
    graph = two_clusters()
    communities = summarise_communities(graph, detect_communities(graph, CommunitySettings()), PASSAGES,
                                        CommunitySettings(summary_sentences=1))
    cratchits = next(c for c in communities if "person:bob" in c.entity_ids)
    assert cratchits.title.startswith("Bob")  # highest weighted degree inside the community
    assert cratchits.summary.startswith("Entities: Bob, ")
    # The one sentence that names three members wins.
    assert cratchits.summary.endswith("Martha kissed Tim and Bob laughed.")
    belle = next(c for c in communities if c.entity_ids == ["person:belle"])
    assert belle.title == "Belle" and "Belle walked alone by the river." in belle.summary
