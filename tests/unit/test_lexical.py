"""BM25 (bm25s) keeps its debug lines to itself: bm25s sets its logger to DEBUG when imported,
and a handler on the root logger (which any library's `logging.warning(...)` adds) would print them."""
from __future__ import annotations

import logging

from pagerag.index.lexical import BM25Index


def test_bm25_logs_nothing_below_warning(caplog):
    with caplog.at_level(logging.DEBUG):  # a root handler that takes every record
        index = BM25Index.build(["Marley was dead: to begin with.", "Scrooge signed it."])
        docs, _ = index.search("Who signed it?", 2)
    assert docs.tolist() == [1]
    assert [r for r in caplog.records if r.name.startswith("bm25s") and r.levelno < logging.WARNING] == []
