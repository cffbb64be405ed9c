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
