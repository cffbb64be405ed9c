"""Fusion and rerank ordering, sentence windows, JSON shape of a retrieval record."""
from __future__ import annotations

import json

from pagerag.records import Analysis, EntityLink, Retrieval, Signals, Window
from pagerag.retrieve.fusion import GRAPH_WEIGHT, apply_rerank, fuse
from pagerag.retrieve.operators import Candidate, OperatorResult, rrf
from pagerag.retrieve.plan import plan
from pagerag.settings import load_settings
from pagerag.text.sentences import cut_windows


def _plan():
    links = [EntityLink("A", 0, 1, "a", "A", "exact", 0.9), EntityLink("B", 2, 3, "b", "B", "exact", 0.9)]
    return plan(Analysis("q", links=links, need="relational"), load_settings(environ={}))


def test_rrf_adds_reciprocal_ranks():
    fused = rrf([([1, 2, 3], 1.0), ([3, 1], 1.0)], k=60)
    assert fused[1] == 1 / 61 + 1 / 62
    assert fused[3] == 1 / 63 + 1 / 61
    assert max(fused, key=fused.get) == 1


def test_fuse_weights_graph_operators_by_their_share_and_keeps_provenance():
    p = _plan()
    text = OperatorResult("text", [Candidate(10, 0.03, {"dense": 0.7}), Candidate(11, 0.02)])
    path = OperatorResult("path", [Candidate(12, 0.9, {"path": 0.5}, paths=["A —[x]→ B"]), Candidate(10, 0.8)])
    items = fuse([text, path], p, k=60)
    by_row = {it.row: it for it in items}
    assert items[0].row == 10  # found by both
    assert set(by_row[10].operators) == {"text", "path"}
    assert by_row[12].paths == ["A —[x]→ B"]
    assert by_row[12].fused == GRAPH_WEIGHT * p.shares["path"] / 61
    assert by_row[11].fused == 1.0 / 62  # the text floor counts fully


def test_rerank_reorders_scored_items():
    p = _plan()
    items = fuse([OperatorResult("text", [Candidate(r, 1.0) for r in (1, 2, 3)])], p, k=60)
    best = {row: Window(f"p{row}", "d", "f", 0, 5, "text.", [(0, 5)], score=s) for row, s in ((3, 0.9), (1, 0.1), (2, 0.5))}
    order = [it.row for it in apply_rerank(items, best, k=1)]
    assert order[0] == 3 and items[0].window is not None


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
    r = Retrieval("q", Analysis("q"), p, [], [], sig, {"total": 1.0})
    data = json.loads(json.dumps(r.to_dict()))
    assert {"analysis", "plan", "evidence", "timings_ms", "signals"} <= set(data)
    assert data["plan"]["shares"] == p.shares
