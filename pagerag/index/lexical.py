"""Lexical retrieval: BM25 with bm25s, persisted inside the repository (bm25/)."""
from __future__ import annotations

import functools
import logging
from pathlib import Path

import numpy as np

_TOKEN_PATTERN = r"(?u)\b\w\w+\b"


@functools.cache
def import_bm25s():
    """bm25s, its logger kept at WARNING: bm25s sets it to DEBUG when imported, and then any
    handler on the root logger prints its "Building index from tokens" (a library's
    `logging.warning(...)` adds one: ONNX Runtime's quantiser during a fresh install's export)."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def _tokenize(texts: list[str]) -> list[list[str]]:
    bm25s = import_bm25s()
    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False,
                          token_pattern=_TOKEN_PATTERN)


class BM25Index:
    """BM25 over passages; document i of the index is passage i of the repository."""

    def __init__(self, retriever, n_docs: int):
        self._retriever = retriever
        self.n_docs = n_docs

    @classmethod
    def build(cls, texts: list[str]) -> "BM25Index":
        bm25s = import_bm25s()
        retriever = bm25s.BM25()
        retriever.index(_tokenize(texts), show_progress=False)
        return cls(retriever, len(texts))

    def save(self, directory: Path) -> None:
        self._retriever.save(str(directory), show_progress=False)
        (Path(directory) / "n_docs.txt").write_text(str(self.n_docs))

    @classmethod
    def load(cls, directory: Path) -> "BM25Index":
        bm25s = import_bm25s()
        retriever = bm25s.BM25.load(str(directory), mmap=False, show_progress=False, verbosity=0)
        return cls(retriever, int((Path(directory) / "n_docs.txt").read_text()))

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(passage indices, BM25 scores), best first; empty when no query term is indexed."""
        tokens = _tokenize([query])
        if not tokens[0] or self.n_docs == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        k = min(k, self.n_docs)
        try:
            docs, scores = self._retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        except ValueError:  # bm25s raises when none of the query tokens is in the vocabulary
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        keep = scores[0] > 0
        return docs[0][keep].astype(np.int64), scores[0][keep]
