"""A question's graph view holds the relations as columns (graph.relation_table): read from the
repository's table without making records, pickled into the query snapshot as lists, and each
relation made as a record only when an operator reads it -- the same record the repository holds."""
from __future__ import annotations

import pickle

from pagerag.graph.relation_table import RelationTable
from pagerag.repository import Repository


def test_the_relation_table_gives_the_repositorys_relations_in_order(carol_repo):
    repo = Repository.open(carol_repo)
    records = repo.graph("governed").relations
    table = repo.relation_table("governed")
    assert len(records) > 20 and len(table) == len(records)
    assert list(table) == [r.relation_id for r in records]  # row order kept
    for r in records:
        assert table[r.relation_id] == r and table.passage_ids(r.relation_id) == r.passage_ids
    assert [(s, t, w, i) for s, t, w, i in table.edges()] == [(r.source, r.target, r.weight, r.relation_id)
                                                                 for r in records]
    assert "no-such-relation" not in table and records[0].relation_id in table


def test_a_pickled_table_is_columns_and_loads_the_same_relations(carol_repo):
    records = Repository.open(carol_repo).graph("governed").relations
    table = RelationTable.of(records)
    loaded = pickle.loads(pickle.dumps(table))
    assert loaded.columns == table.columns and loaded._rows is None  # the id index is rebuilt, not pickled
    assert [loaded[r.relation_id] for r in records] == records
    # a record read from the table is a copy: changing it does not change the table
    first = loaded[records[0].relation_id]
    first.passage_ids.append("elsewhere")
    assert loaded[records[0].relation_id].passage_ids == records[0].passage_ids


def test_the_view_built_from_columns_equals_the_one_built_from_records(carol_repo):
    import numpy as np

    from pagerag.retrieve.views import build_view

    repo = Repository.open(carol_repo)
    graph, n, dim = repo.graph("governed"), len(repo.passages), repo.passage_vectors.shape[1]
    vectors = np.asarray(repo.entity_vectors("governed"), np.float32)
    from_records = build_view("governed", graph, vectors, n, dim)
    from_columns = build_view("governed", repo.graph("governed", relations=False), vectors, n, dim,
                              relations=repo.relation_table("governed"))
    edges = lambda view: sorted((u, v, d["info"].weight, tuple(d["info"].relation_ids))  # noqa: E731
                                for u, v, d in view.nx.edges(data=True))
    assert edges(from_columns) == edges(from_records) and len(edges(from_records)) > 10
    assert from_columns.relation_by_id.columns == from_records.relation_by_id.columns
    assert from_columns.graph.relations == [] and from_columns.graph.entities == graph.entities
