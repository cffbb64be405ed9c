"""Lexical retrieval: BM25 over the passages, bm25s's (lucene variant, k1 1.5, b 0.75).

A repository of format 2 on keeps one shard per document in lexical/<doc>.npz: the document's
passages' term counts and lengths (ShardedBM25). An add writes only its documents' shards and a
remove deletes its documents'; the scores are made at query time with IDF and the average
passage length over every shard, so they are the scores of one bm25s index over all passages
(tested to 1e-5). Why not LanceDB's full-text index: its recall on the training books'
questions is bm25s's, but an add through LanceDB's optimize rewrote the whole passage table
(vectors too) and the whole index, and its scores (an input of the trained rankers) are not
bm25s's (docs/library.md, "Lexical index"). A format-1 repository's single bm25s index in bm25/
(BM25Index) is read as it was.
"""
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


def tokenize(texts: list[str]) -> list[list[str]]:
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
        retriever.index(tokenize(texts), show_progress=False)
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
        tokens = tokenize([query])
        if not tokens[0] or self.n_docs == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        k = min(k, self.n_docs)
        try:
            docs, scores = self._retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        except ValueError:  # bm25s raises when none of the query tokens is in the vocabulary
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        keep = scores[0] > 0
        return docs[0][keep].astype(np.int64), scores[0][keep]


LEXICAL_DIR = "lexical"
K1, B = 1.5, 0.75  # bm25s.BM25()'s defaults, which BM25Index builds with


def save_shard(path: Path, texts: list[str]) -> None:
    """One document's shard: its passages' lengths (in tokens) and term counts, term-major
    (postings of term t: rows[indptr[t]:indptr[t + 1]], local passage indices ascending)."""
    tokens = tokenize(texts) if texts else []
    vocab = sorted({t for doc in tokens for t in doc})
    ids = {t: i for i, t in enumerate(vocab)}
    lengths = np.array([len(doc) for doc in tokens], dtype=np.int64)
    terms = np.fromiter((ids[t] for doc in tokens for t in doc), dtype=np.int64, count=int(lengths.sum()))
    n = max(len(tokens), 1)
    # one key per (term, passage): sorted, term-major with passages ascending; counted
    keys, tf = np.unique(terms * n + np.repeat(np.arange(len(tokens)), lengths), return_counts=True)
    np.savez(path, vocab=np.frombuffer("\n".join(vocab).encode(), dtype=np.uint8), lengths=lengths.astype(np.int32),
             indptr=np.searchsorted(keys // n, np.arange(len(vocab) + 1)).astype(np.int64),
             rows=(keys % n).astype(np.int32), tf=tf.astype(np.int32))


def _load_shard(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        shard = {key: data[key] for key in data.files}
    text = shard.pop("vocab").tobytes().decode()
    shard["vocab"] = text.split("\n") if text else []
    return shard


class ShardedBM25:
    """BM25 over per-document shards, scored as one bm25s index over all of them: the shards'
    postings merged into one term-major table at load, IDF and the average length over all rows
    (bm25s's lucene formulas and float32 accumulation, its top-k selection)."""

    def __init__(self, vocab: dict[str, int], indptr, rows, tf, lengths: np.ndarray):
        self._vocab, self._indptr, self._rows, self._tf = vocab, indptr, rows, tf
        self.n_docs = len(lengths)
        df = np.diff(indptr)
        # bm25s: IDF per term in float64, kept as float32 (_build_idf_array); the length norm of
        # each passage in float64 as bm25s's _score_tfc_robertson makes it
        self._idf = np.log(1 + (self.n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
        self._norm = K1 * ((1 - B) + B * lengths / (lengths.mean() if self.n_docs else 1.0))

    @classmethod
    def load(cls, directory: Path, row_docs: list[str]) -> "ShardedBM25":
        """The shards of the documents of `row_docs` (the document of each passage row, in row
        order); a document's k-th passage row is its shard's passage k."""
        order = list(dict.fromkeys(row_docs))
        rows_of = {d: [] for d in order}
        for row, doc in enumerate(row_docs):
            rows_of[doc].append(row)
        shards = [_load_shard(Path(directory) / f"{d}.npz") for d in order]
        for d, shard in zip(order, shards):
            if len(shard["lengths"]) != len(rows_of[d]):
                raise ValueError(f"the BM25 shard of {d} has {len(shard['lengths'])} passages, the table {len(rows_of[d])}")
        return cls._merge(shards, [np.array(rows_of[d], dtype=np.int64) for d in order], len(row_docs))

    @classmethod
    def _merge(cls, shards: list[dict], rows_of: list[np.ndarray], n_rows: int) -> "ShardedBM25":
        vocab: dict[str, int] = {}  # the union's terms, numbered as first met
        terms, rows, tf = [], [], []
        lengths = np.zeros(n_rows, dtype=np.int64)
        for shard, global_rows in zip(shards, rows_of):
            local = np.array([vocab.setdefault(t, len(vocab)) for t in shard["vocab"]], dtype=np.int64)
            terms.append(np.repeat(local, np.diff(shard["indptr"])))
            rows.append(global_rows[shard["rows"]])
            tf.append(shard["tf"])
            lengths[global_rows] = shard["lengths"]
        terms, rows, tf = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (terms, rows, tf))
        # grouped by term; the order of rows within a term is free (each row once in a term's sum)
        order = np.argsort(terms, kind="stable")
        indptr = np.searchsorted(terms[order], np.arange(len(vocab) + 1))
        return cls(vocab, indptr, rows[order], tf[order].astype(np.float32), lengths)

    def scores(self, tokens: list[str]) -> np.ndarray:
        """bm25s's get_scores: every query token in the vocabulary, repeats included, added in
        order in float32."""
        out = np.zeros(self.n_docs, dtype=np.float32)
        for t in (self._vocab[t] for t in tokens if t in self._vocab):
            span = slice(self._indptr[t], self._indptr[t + 1])
            rows, tf = self._rows[span], self._tf[span]
            out[rows] += (self._idf[t] * (tf / (self._norm[rows] + tf))).astype(np.float32)
        return out

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(passage indices, BM25 scores), best first; empty when no query term is indexed."""
        tokens = [t for t in tokenize([query])[0] if t in self._vocab]
        if not tokens or self.n_docs == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        from bm25s.selection import topk

        scores, docs = topk(self.scores(tokens), min(k, self.n_docs), backend="auto", sorted=True)  # as bm25s retrieve
        keep = scores > 0
        return np.asarray(docs)[keep].astype(np.int64), np.asarray(scores)[keep]
