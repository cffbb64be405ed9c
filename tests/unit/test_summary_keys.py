"""A community's summary is reused while its content key holds: the key's member centralities,
computed a level at a time, are exactly what the graph index gives community by community,
0 and 0.0 told apart as the key's JSON tells them."""
from __future__ import annotations

import json

import numpy as np

from pagerag.graph.summaries import GraphIndex, member_centralities, summary_inputs
from pagerag.records import Community, Entity, Graph, Relation


def test_member_centralities_are_the_index_centralities():
    rng = np.random.default_rng(5)
    ids = [f"e{i:02d}" for i in range(30)]
    entities = [Entity(e, f"Name {e}", "PERSON", mentions=1, passage_ids=[f"p{i}"]) for i, e in enumerate(ids)]
    relations = [Relation(f"r{k}", ids[a], ids[b], "knows", "cooccurs", float(rng.integers(1, 5)))
                 for k, (a, b) in enumerate(rng.integers(0, 30, size=(70, 2)))]
    relations += [Relation("loop", ids[3], ids[3], "knows", "cooccurs", 2.0),
                  Relation("zero", ids[0], ids[1], "knows", "svo", 0.0),
                  Relation("outside", ids[2], "not-in-any-community", "knows", "svo", 3.0)]
    communities = [Community("L0-0", 0, None, ids[:10] + ["e29"]), Community("L0-1", 0, None, ids[10:20]),
                   Community("L1-0", 1, None, ids[:4]), Community("L1-1", 1, None, ["e28", "gone"]),
                   Community("L2-0", 2, None, ids[:6]), Community("L2-1", 2, None, ids[4:12])]  # level 2 overlaps
    graph = Graph(entities, relations, communities)
    index = GraphIndex(graph)
    got = member_centralities(graph, communities, index)
    expected = [index.centrality(c.entity_ids) for c in communities]
    assert json.dumps(got) == json.dumps(expected)
    assert got[3] == {"e28": 0, "gone": 0} and isinstance(got[3]["e28"], int)
    assert summary_inputs(graph, communities) == summary_inputs(graph, communities, index)
    # the summaries read the centralities the keys found, for the same member list only
    for c in communities:
        assert index.community_centrality(c) is index.known[c.community_id][1]
    changed = Community("L0-0", 0, None, ids[:3])
    assert index.community_centrality(changed) == GraphIndex(graph).centrality(ids[:3])
