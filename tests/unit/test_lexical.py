"""BM25 (bm25s) keeps its debug lines to itself: bm25s sets its logger to DEBUG when imported,
and a handler on the root logger (which any library's `logging.warning(...)` adds) would print them."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from pagerag.index.lexical import BM25Index, tokenize


def test_bm25_logs_nothing_below_warning(caplog):
    with caplog.at_level(logging.DEBUG):  # a root handler that takes every record
        index = BM25Index.build(["Marley was dead: to begin with.", "Scrooge signed it."])
        docs, _ = index.search("Who signed it?", 2)
    assert docs.tolist() == [1]
    assert [r for r in caplog.records if r.name.startswith("bm25s") and r.levelno < logging.WARNING] == []


def _paragraphs(data_dir, n: int) -> list[str]:
    text = (data_dir / "books" / "christmas_carol.txt").read_text(encoding="utf-8")
    return [p for p in (" ".join(x.split()) for x in text.split("\n\n")) if p][:n]


QUESTIONS = ("Who is Marley?", "Scrooge Scrooge counting-house clerk Cratchit", "a ghost dragging chains at midnight",
             "What did Fezziwig do at the ball?", "door-nail", "no such wordxyz", "a the of")


def test_shards_score_as_one_bm25s_index(data_dir, tmp_path):
    """Per-document shards, merged at query time, give one bm25s index's scores over all their
    passages (to 1e-5) and its top k; the rows of a document need not be contiguous."""
    from pagerag.index.lexical import ShardedBM25, save_shard

    texts = _paragraphs(data_dir, 400) + [""]  # a passage with no terms still counts
    docs = [("d0", "d1", "d2")[i % 7 % 3] for i in range(len(texts))]
    for doc in sorted(set(docs)):
        save_shard(tmp_path / f"{doc}.npz", [t for t, d in zip(texts, docs) if d == doc])
    sharded, whole = ShardedBM25.load(tmp_path, docs), BM25Index.build(texts)
    assert sharded.n_docs == whole.n_docs == len(texts)
    for question in QUESTIONS:
        tokens = [t for t in tokenize([question])[0] if t in whole._retriever.vocab_dict]
        if tokens:  # every passage's score
            assert np.allclose(sharded.scores(tokens), whole._retriever.get_scores(tokens), rtol=0, atol=1e-5), question
        rows, scores = sharded.search(question, 20)
        want_rows, want_scores = whole.search(question, 20)
        assert rows.tolist() == want_rows.tolist(), question
        assert np.allclose(scores, want_scores, rtol=0, atol=1e-5), question


def test_a_shard_of_the_wrong_length_is_refused(tmp_path):
    from pagerag.index.lexical import ShardedBM25, save_shard

    save_shard(tmp_path / "d.npz", ["Marley was dead.", "Scrooge signed it."])
    with pytest.raises(ValueError, match="2 passages, the table 3"):
        ShardedBM25.load(tmp_path, ["d", "d", "d"])
