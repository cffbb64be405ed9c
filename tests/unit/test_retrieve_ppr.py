"""Personalised PageRank on a small hand-made graph with a known answer."""
from __future__ import annotations

import numpy as np
import pytest

from pagerag.records import Entity, Graph, Relation
from pagerag.retrieve.ppr import build_ppr_graph, personalised_pagerank
from pagerag.retrieve.state import build_view

N_PASSAGES = 6


def _view():
    entities = [
        Entity("e0", "Ann", "PERSON", [], 2, ["p0", "p1"]),
        Entity("e1", "Bob", "PERSON", [], 2, ["p1", "p2"]),
        Entity("e2", "Cy", "PERSON", [], 1, ["p3"]),
        Entity("e3", "Di", "PERSON", [], 2, ["p4", "p5"]),
    ]
    relations = [Relation("r0", "e0", "e1", "knows", "svo", 3.0, ["p1"]),
                 Relation("r1", "e2", "e3", "knows", "svo", 3.0, ["p3"])]
    vectors = np.eye(4, 8, dtype=np.float32)
    return build_view("governed", Graph(entities, relations, []), vectors, N_PASSAGES, 8)


@pytest.fixture(scope="module")
def graph():
    return build_ppr_graph(_view(), {f"p{i}": i for i in range(N_PASSAGES)}, N_PASSAGES)


def _seed_ann(graph):
    seeds = np.zeros(graph.size)
    seeds[0] = 1.0  # Ann
    return seeds


def test_transition_is_column_stochastic(graph):
    sums = np.asarray(graph.transition.sum(axis=0)).ravel()
    assert np.allclose(sums[~graph.dangling], 1.0)
    assert graph.n_entities == 4 and graph.size == 4 + N_PASSAGES


def test_matches_the_closed_form_and_ranks_the_shared_passage_first(graph):
    d = 0.5
    x = personalised_pagerank(graph, _seed_ann(graph), damping=d)
    s = _seed_ann(graph)
    exact = np.linalg.solve(np.eye(graph.size) - d * graph.transition.toarray(), (1 - d) * s)
    assert np.allclose(x, exact, atol=1e-6)
    passages = x[graph.n_entities:]
    # p1 names Ann and Bob, p0 only Ann, p2 only Bob (reached through Ann's edge)
    assert passages[1] > passages[0] > passages[2] > 0
    # Cy and Di's component is never reached from Ann
    assert np.all(passages[3:] == 0) and abs(x.sum() - 1.0) < 1e-6


def test_a_blocked_passage_gets_nothing_and_passes_nothing_on(graph):
    blocked = np.zeros(graph.size, bool)
    blocked[graph.n_entities + 1] = True  # hide p1
    free = personalised_pagerank(graph, _seed_ann(graph))
    masked = personalised_pagerank(graph, _seed_ann(graph), blocked=blocked)
    assert masked[graph.n_entities + 1] == 0
    assert masked[graph.n_entities + 2] < free[graph.n_entities + 2]  # less reaches Bob's p2 without p1


def test_no_seed_no_mass(graph):
    assert not personalised_pagerank(graph, np.zeros(graph.size)).any()


def test_provenance_matrix_lists_the_entities_of_each_passage(graph):
    rows = graph.passage_entities.tocsr()
    assert sorted(rows[1].indices.tolist()) == [0, 1] and rows[3].indices.tolist() == [2]
    assert graph.entity_names == ["Ann", "Bob", "Cy", "Di"]
