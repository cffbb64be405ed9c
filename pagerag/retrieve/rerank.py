"""O_r: rerank the fused pool finer than passage level.

A passage is cut into sentence windows (whole sentences, about WINDOW_CHARS characters); its
rerank score is the best window's score: cosine with the question under the embedding model, or
a `sentence_transformers.CrossEncoder` score when `retrieve.rerank_model` names a local
cross-encoder directory. The best window also tells the budget cut which part of a passage to
keep when the whole passage does not fit.

Window vectors are the expensive part, so they are cached per repository, in memory and on disk.
`build_window_index` embeds them all once (a whole book: about four windows per passage); until
then a question embeds only the windows of its top ON_DEMAND_ROWS uncached candidates and adds
them to the disk cache.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..text.sentences import split_sentences
from .state import RepoState

WINDOW_CHARS = 320
ON_DEMAND_ROWS = 6
Encode = Callable[[list[str]], np.ndarray]


@dataclass
class WindowScore:
    row: int
    score: float
    start: int  # absolute offsets of the best window in the source text
    end: int


def passage_windows(text: str, start: int, end: int, max_chars: int = WINDOW_CHARS) -> list[tuple[int, int]]:
    """Spans of whole consecutive sentences inside text[start:end], each <= max_chars where a
    sentence allows, covering the passage; consecutive windows overlap by one sentence."""
    sentences = split_sentences(text, start, end)
    if not sentences:
        return [(start, end)]
    windows: list[tuple[int, int]] = []
    i = 0
    while i < len(sentences):
        j = i
        while j + 1 < len(sentences) and sentences[j + 1][1] - sentences[i][0] <= max_chars:
            j += 1
        windows.append((sentences[i][0], sentences[j][1]))
        if j + 1 >= len(sentences):
            break
        i = j if j > i else j + 1  # overlap by one sentence when the window holds several
    return windows


class WindowIndex:
    """Sentence windows and their vectors per passage row, filled lazily or from disk."""

    def __init__(self, state: RepoState, model: str):
        self.state = state
        self.model = model
        self.spans: dict[int, list[tuple[int, int]]] = {}
        self.vectors: dict[int, np.ndarray] = {}
        self.persist = True  # write on-demand windows back to the disk cache
        self._lock = threading.Lock()
        self._load()

    def path(self):
        from ..offline import cache_root
        import re

        safe = re.sub(r"[^A-Za-z0-9]+", "_", self.model)[-40:]
        return cache_root() / "retrieve" / f"{self.state.key}-windows-{safe}-{WINDOW_CHARS}.npz"

    def windows_of(self, row: int) -> list[tuple[int, int]]:
        if row not in self.spans:
            p = self.state.passages[row]
            self.spans[row] = passage_windows(self.state.source_text(p.doc_id), p.start, p.end)
        return self.spans[row]

    def ensure(self, rows: list[int], encode: Encode) -> None:
        """Embed the windows of rows not yet cached, in one batch."""
        with self._lock:
            missing = [r for r in dict.fromkeys(rows) if r not in self.vectors]
            if not missing:
                return
            texts, owners = [], []
            for row in missing:
                source = self.state.source_text(self.state.passages[row].doc_id)
                for s, e in self.windows_of(row):
                    texts.append(source[s:e])
                    owners.append(row)
            vectors = encode(texts)
            owners_arr = np.asarray(owners)
            for row in missing:
                self.vectors[row] = vectors[owners_arr == row]

    def covered(self, rows: list[int]) -> list[int]:
        return [r for r in rows if r in self.vectors]

    def save(self) -> None:
        # Under the lock: a server's other questions add windows while this one writes them, and
        # iterating a dict that grows raises. The temporary file is per thread for the same reason.
        with self._lock:
            rows = sorted(self.vectors)
            counts = np.array([len(self.spans[r]) for r in rows], np.int64)
            spans = np.array([s for r in rows for s in self.spans[r]], np.int64).reshape(-1, 2)
            vectors = np.concatenate([self.vectors[r] for r in rows]) if rows else np.zeros((0, 384), np.float32)
        path = self.path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp{threading.get_ident()}.npz")
        np.savez(tmp, rows=np.array(rows, np.int64), counts=counts, spans=spans, vectors=vectors)
        tmp.replace(path)

    def reload(self) -> None:
        """Forget the in-memory windows and read the disk cache again."""
        self.spans.clear()
        self.vectors.clear()
        self._load()

    def _load(self) -> None:
        path = self.path()
        if not path.is_file():
            return
        try:
            with np.load(path) as data:
                # Each data[key] reads the array anew: take every array once (slices below are views).
                rows, counts, spans, vectors = (data[k] for k in ("rows", "counts", "spans", "vectors"))
            offsets = np.concatenate([[0], np.cumsum(counts)])
            span_list = spans.tolist()
            for i, row in enumerate(rows.tolist()):
                lo, hi = int(offsets[i]), int(offsets[i + 1])
                self.spans[row] = [tuple(s) for s in span_list[lo:hi]]
                self.vectors[row] = vectors[lo:hi]
        except (OSError, ValueError, KeyError):
            self.spans.clear()
            self.vectors.clear()


_INDEXES: dict[tuple[str, str], WindowIndex] = {}


def window_index(state: RepoState, model: str) -> WindowIndex:
    key = (state.key, model)
    if key not in _INDEXES:
        _INDEXES[key] = WindowIndex(state, model)
    return _INDEXES[key]


def build_window_index(state: RepoState, model: str, encode: Encode, batch: int = 512) -> WindowIndex:
    """Embed every passage's windows once and keep them on disk (makes rerank ~free per question)."""
    index = window_index(state, model)
    rows = [r for r in range(len(state.passages)) if r not in index.vectors]
    for lo in range(0, len(rows), batch):
        index.ensure(rows[lo : lo + batch], encode)
    index.save()
    return index


@functools.lru_cache(maxsize=2)
def _cross_encoder(path: str):
    from ..index.embed import resolve_model_path
    from ..offline import forbid_hub_downloads

    forbid_hub_downloads()
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(resolve_model_path(path)), device="cpu")


def score_windows(state: RepoState, rows: list[int], question: str, qvec: np.ndarray, encode: Encode,
                  model: str, cross_encoder: str = "") -> list[WindowScore]:
    """Best-window score of each row that can be scored now (cached rows, plus the first
    ON_DEMAND_ROWS uncached ones); rows beyond that keep their fused order. `qvec` may hold
    several vectors (rows): a window's score is its best cosine with any of them."""
    index = window_index(state, model)
    uncached = [r for r in rows if r not in index.vectors][:ON_DEMAND_ROWS]
    if uncached:
        index.ensure(uncached, encode)
        if index.persist:
            index.save()  # the next process (a CLI call) starts with these windows
    scorable = index.covered(rows)
    if cross_encoder:
        return _cross_scores(state, index, scorable, question, cross_encoder)
    out = []
    qmat = np.atleast_2d(qvec)  # several query vectors (a multi-hop question's parts): best of them
    for row in scorable:
        sims = (index.vectors[row] @ qmat.T).max(axis=1)
        best = int(np.argmax(sims))
        s, e = index.spans[row][best]
        out.append(WindowScore(row=row, score=float(sims[best]), start=s, end=e))
    return out


def _cross_scores(state: RepoState, index: WindowIndex, rows: list[int], question: str, model_path: str
                  ) -> list[WindowScore]:
    pairs, owners = [], []
    for row in rows:
        source = state.source_text(state.passages[row].doc_id)
        for s, e in index.windows_of(row):
            pairs.append((question, source[s:e]))
            owners.append((row, s, e))
    if not pairs:
        return []
    scores = np.asarray(_cross_encoder(model_path).predict(pairs, show_progress_bar=False), dtype=np.float64).ravel()
    best: dict[int, WindowScore] = {}
    for (row, s, e), score in zip(owners, scores):
        if row not in best or score > best[row].score:
            best[row] = WindowScore(row=row, score=float(score), start=s, end=e)
    return [best[r] for r in rows if r in best]
