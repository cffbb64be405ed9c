"""A community's vector is made from vectors the repository already holds (no encoder call): the
mean name vector of its most central members plus the mean vector of its most central passages,
each of unit length. Checked against that definition written out by hand, on a graph where the
central members and passages are known, and for what it is for: a question about one
community's members is nearer its vector than the other's."""
from __future__ import annotations

import numpy as np

from pagerag.records import Community, Entity, Graph, Relation
from pagerag.retrieve.views import (COMPOSED_NAMES, COMPOSED_PASSAGES, build_view, community_passage_centrality,
                                    composed_community_vectors)

DIM = 16


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def graph_and_vectors(rng: np.random.Generator):
    """Two communities of 12 members; in each, member 0 is related to every other (the most
    central), the rest to member 0 only; every member is in its own passage and in a shared one."""
    entities, relations, communities = [], [], []
    for c in range(2):
        ids = [f"c{c}e{i}" for i in range(12)]
        for i, eid in enumerate(ids):
            entities.append(Entity(eid, f"Name {c} {i}", "PERSON", mentions=12 - i, passage_ids=[f"p{c}-{i}", f"p{c}-all"]))
        for i in range(1, 12):
            relations.append(Relation(f"r{c}-{i}", ids[0], ids[i], "knows", "co", 1.0 + i / 10))
        communities.append(Community(f"L0-{c}", 0, None, ids, [f"p{c}-{i}" for i in range(12)] + [f"p{c}-all"]))
    passage_ids = [f"p{c}-{i}" for c in range(2) for i in [*range(12), "all"]]
    topic = [unit(rng.normal(size=DIM)) for _ in range(2)]  # what each community is about
    names = np.array([unit(topic[int(e.entity_id[1])] + 0.8 * rng.normal(size=DIM)) for e in entities], np.float32)
    passages = np.array([unit(topic[int(p[1])] + 0.8 * rng.normal(size=DIM)) for p in passage_ids], np.float32)
    return Graph(entities, relations, communities), names, passages, {p: i for i, p in enumerate(passage_ids)}, topic


def test_a_community_vector_is_its_central_names_and_passages():
    rng = np.random.default_rng(3)
    graph, names, passages, index, _ = graph_and_vectors(rng)
    view = build_view("governed", graph, names, n_passages=len(index), dim=DIM)
    rows = community_passage_centrality(view, index)
    vectors = composed_community_vectors(view, rows, passages)
    for c, community in enumerate(graph.communities):
        # member 0's degree is the sum of its relations; member i's is 1 + i/10: the most central
        # are member 0, then 11, 10, ...
        central = [0, *range(11, 11 - (COMPOSED_NAMES - 1), -1)]
        name_part = unit(np.mean([names[12 * c + i] for i in central], axis=0))
        # the shared passage holds every member, member 0's own passage the most central one
        order = [f"p{c}-all", f"p{c}-0", *(f"p{c}-{i}" for i in range(11, 0, -1))][:COMPOSED_PASSAGES]
        passage_part = unit(np.mean([passages[index[p]] for p in order], axis=0))
        assert np.allclose(vectors[c], unit(name_part + passage_part), atol=1e-6)
        assert abs(np.linalg.norm(vectors[c]) - 1) < 1e-6


def test_a_question_about_a_community_is_nearest_its_vector():
    rng = np.random.default_rng(7)
    graph, names, passages, index, topic = graph_and_vectors(rng)
    view = build_view("governed", graph, names, n_passages=len(index), dim=DIM)
    vectors = composed_community_vectors(view, community_passage_centrality(view, index), passages)
    for c in range(2):
        question = unit(topic[c] + 0.3 * rng.normal(size=DIM))
        assert int(np.argmax(vectors @ question)) == c


def test_a_community_with_neither_names_nor_passages_has_a_zero_vector():
    graph = Graph([Entity("a", "A", "PERSON")], [], [Community("L0-0", 0, None, ["gone"], [])])
    view = build_view("governed", graph, np.ones((1, DIM), np.float32), n_passages=0, dim=DIM)
    vectors = composed_community_vectors(view, community_passage_centrality(view, {}), np.zeros((0, DIM), np.float32))
    assert vectors.shape == (1, DIM) and not vectors.any()


def hierarchy_graph(rng: np.random.Generator):
    """40 entities with random weighted relations (some repeated between one pair, one a self
    loop), level 0 a partition of most of them, level 1 sub-communities of level 0's, and level 2
    two communities that share members (not a partition)."""
    ids = [f"e{i:02d}" for i in range(40)]
    entities = [Entity(e, f"Name {e}", "PERSON", mentions=int(rng.integers(1, 9)),
                       passage_ids=sorted({f"p{int(j)}" for j in rng.integers(0, 30, size=int(rng.integers(1, 5)))}))
                for e in ids]
    relations = [Relation(f"r{k}", ids[a], ids[b], "knows", "cooccurs", float(rng.integers(1, 6)))
                 for k, (a, b) in enumerate(rng.integers(0, 40, size=(120, 2)))]
    relations.append(Relation("loop", ids[0], ids[0], "knows", "cooccurs", 4.0))
    level0 = [ids[0:12], ids[12:25], ids[25:37]]  # e37..e39 in no community
    level1 = [ids[0:5], ids[5:12], ids[12:20]]
    level2 = [ids[0:10] + ["missing"], ids[5:18]]
    communities = [Community(f"L{level}-{i}", level, None, members)
                   for level, groups in enumerate([level0, level1, level2]) for i, members in enumerate(groups)]
    return Graph(entities, relations, communities), {f"p{j}": j for j in range(30)}


def test_member_degrees_and_passage_centrality_agree_with_their_definition():
    """all_member_degrees (one pass over the edges per level) and community_passage_centrality
    (a sparse product) against the definitions walked out member by member."""
    from collections import defaultdict

    from pagerag.retrieve.views import all_member_degrees, member_degrees

    rng = np.random.default_rng(11)
    graph, index = hierarchy_graph(rng)
    view = build_view("governed", graph, np.ones((len(graph.entities), DIM), np.float32), n_passages=len(index), dim=DIM)
    degrees = all_member_degrees(view)
    assert degrees == [member_degrees(view, c) for c in graph.communities]
    assert "missing" not in degrees[-2] and degrees[0]["e00"] > 1.0
    rows = community_passage_centrality(view, index, degrees)
    for community, members, (got_rows, got_centrality) in zip(graph.communities, degrees, rows):
        weight = defaultdict(float)
        for m, degree in members.items():
            for pid in view.entity(m).passage_ids:
                weight[index[pid]] += degree
        expected = sorted(weight)
        assert got_rows.dtype == np.int64 and got_rows.tolist() == expected
        top = max(weight.values())
        assert np.allclose(got_centrality, [weight[r] / top for r in expected], rtol=0, atol=1e-12)
