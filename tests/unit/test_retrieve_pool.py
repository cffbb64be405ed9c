"""The candidate pool, its features and the ranker's order; sentence windows; the JSON shape of a
retrieval record."""
from __future__ import annotations

import json

import numpy as np

from pagerag.records import Analysis, EntityLink, Retrieval, Signals, Window
from pagerag.retrieve.operators import Candidate, DenseHits, OperatorResult, rrf
from pagerag.retrieve.plan import plan
from pagerag.retrieve.pool import FEATURES, TEXT_FEATURES, QuestionSignals, build_pool, features
from pagerag.retrieve.ranker import RankerModel, load_rankers, operator_order, order
from pagerag.settings import load_settings
from pagerag.text.sentences import cut_windows


def _plan():
    links = [EntityLink("A", 0, 1, "a", "A", "exact", 0.9), EntityLink("B", 2, 3, "b", "B", "exact", 0.9)]
    return plan(Analysis("q", links=links, need="relational"), load_settings(environ={}))


def _results():
    text = OperatorResult("text", [Candidate(10, 0.03, {"dense": 0.7}), Candidate(11, 0.02)])
    path = OperatorResult("path", [Candidate(12, 0.9, {"path": 0.5}, paths=["A —[x]→ B"]), Candidate(10, 0.8, {"path": 0.4})])
    ppr = OperatorResult("ppr", [Candidate(13, 1.0, {"ppr": 1.0}, entities=["A"])],
                         vectors={"ppr": np.array([0.0] * 10 + [0.2, 0.1, 0.3, 1.0])})
    return [text, path, ppr]


def test_rrf_adds_reciprocal_ranks():
    fused = rrf([([1, 2, 3], 1.0), ([3, 1], 1.0)], k=60)
    assert fused[1] == 1 / 61 + 1 / 62
    assert fused[3] == 1 / 63 + 1 / 61
    assert max(fused, key=fused.get) == 1


def test_pool_is_the_union_with_each_operators_rank_and_provenance():
    items = {it.row: it for it in build_pool(_results())}
    assert set(items) == {10, 11, 12, 13}
    assert items[10].operators["text"]["rank"] == 1 and items[10].operators["path"]["rank"] == 2
    assert items[12].paths == ["A —[x]→ B"] and items[13].entities == ["A"]
    assert set(items[11].operators) == {"text"}


def _signals(need=None):
    vectors = np.eye(14, 4, dtype=np.float32)
    vectors[10:] = [[0.9, 0.1, 0, 0], [0.5, 0.5, 0, 0], [0.1, 0.9, 0, 0], [0, 0, 1, 0]]
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    return QuestionSignals(np.array([1, 0, 0, 0], np.float32), vectors, np.full(14, 200.0),
                           DenseHits(np.array([10, 11]), np.array([0.99, 0.7])), np.array([11, 10]),
                           np.array([8.0, 4.0]), need or {"local": 0.1, "complex": 0.8, "global": 0.1},
                           {"ppr": np.array([0.0] * 10 + [0.2, 0.1, 0.3, 1.0])}, [(0.9, frozenset({10, 12}))])


def test_features_read_every_signal_and_are_zero_where_missing():
    items = build_pool(_results())
    x = features(items, _signals())
    assert x.shape == (4, len(FEATURES)) and np.isfinite(x).all()
    col = {name: x[:, i] for i, name in enumerate(FEATURES)}
    rows = [it.row for it in items]
    at = lambda name, row: col[name][rows.index(row)]  # noqa: E731
    assert at("bm25", 11) == 1.0 and at("bm25", 10) == 0.5 and at("bm25", 12) == 0.0
    assert at("dense_rr", 10) == 1.0 and at("dense_rr", 13) == 0.0
    assert at("ppr", 13) == 1.0 and at("path", 12) == 0.5 and at("path_in", 11) == 0.0
    assert at("links", 12) == 1.0 and at("links", 11) == 0.0
    assert at("graph_only", 12) == 1.0 and at("graph_only", 10) == 0.0
    assert at("complex_x_path", 12) == 0.8
    text_only = features(items, _signals(), TEXT_FEATURES)
    assert np.array_equal(text_only, x[:, : len(TEXT_FEATURES)])


def test_order_is_by_score_and_ties_go_to_the_text_floor():
    items = build_pool(_results())
    by_row = {it.row: it for it in items}
    ranked = order(items, np.array([0.5 if it.row in (11, 12) else 0.1 for it in items]))
    assert [it.row for it in ranked][:2] == [11, 12]  # 11 and 12 tie: the text floor's 11 first
    assert by_row[11].final == 0.5
    model = RankerModel("t", ("dense",), np.array([2.0]), 0.0, np.zeros(1), np.ones(1))
    assert model.score(np.array([[0.5], [0.1]])).tolist() == [1.0, 0.2]


def test_operator_order_ranks_by_each_operators_own_score():
    ranked = operator_order(build_pool(_results()), ["ppr", "text"])
    assert [it.row for it in ranked] == [13, 10, 11, 12]


def test_packaged_rankers_load_with_known_features():
    models = load_rankers()
    assert set(models) == {"graph", "text"}
    assert models["text"].features == TEXT_FEATURES and set(models["graph"].features) <= set(FEATURES)
    for m in models.values():
        assert m.weights.shape == (len(m.features),) and np.all(m.scale > 0)


def test_windows_cover_the_passage_with_whole_sentences():
    text = "Intro. " + " ".join(f"Sentence number {i} is here." for i in range(30)) + " End"
    start, end = 7, len(text)
    cut = cut_windows(text, start, end, max_chars=120)
    windows = [(s, e) for s, e, _ in cut]
    for s, e, sentences in cut:  # each window is its own whole sentences
        assert sentences[0][0] == s and sentences[-1][1] == e
    assert windows[0][0] == start and windows[-1][1] == end
    for (s1, e1), (s2, e2) in zip(windows, windows[1:]):
        assert s2 <= e1  # consecutive windows touch or overlap: nothing is skipped
        assert s1 < s2
    assert all(text[s:e].strip() == text[s:e] for s, e in windows)
    assert all(e - s <= 120 for s, e in windows[:-1])


def test_retrieval_to_dict_is_json():
    p = _plan()
    sig = Signals([0.5], ["p1"], [], [], [1.0], ["p1"], 2, False, "relational")
    r = Retrieval("q", Analysis("q"), p, [], [], sig, {"total": 1.0}, graph_features={"n_paths": 2.0})
    data = json.loads(json.dumps(r.to_dict()))
    assert {"analysis", "plan", "evidence", "timings_ms", "signals", "graph_features"} <= set(data)
    assert data["plan"]["operators"] == p.operators and "shares" not in data["plan"]
    assert data["graph_features"] == {"n_paths": 2.0}


def test_window_record_keeps_its_score():
    w = Window("p1", "d", "f", 0, 5, "text.", [(0, 5)], score=0.5)
    assert w.score == 0.5 and w.sentences == [(0, 5)]
