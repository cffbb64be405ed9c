"""Sentence windows of passages: cut once per passage, embedded once, cached in memory and on disk.

A passage is cut into windows of whole sentences (about WINDOW_CHARS characters, consecutive
windows sharing a sentence). The rerank operator scores a passage by its best window; the budget
cut keeps the best window of a passage that does not fit whole; the judge and the answerer read
the windows of the evidence. All three use the same `Window` records from this index.

A window's vector is pooled from its passage's word-piece states (index.pooling: one pass over
the passage, a mean per window). `pagerag build` makes them in its embedding pass (about three
windows per passage) and stores them in the repository (windows/<doc>.npz, `embed.windows`); a
repository without them (built with the setting off) has a question pool the windows it needs
and add them to a disk cache under the cache dir (`build_window_index` fills that cache at once).
A repository built before pooling holds windows embedded one by one; they are read as they are.
"""
from __future__ import annotations

import re
import threading
from dataclasses import replace
from typing import Callable

import numpy as np

from ..records import Window
from ..text.sentences import cut_windows
from .state import RepoState

WINDOW_CHARS = 320
WINDOWS_FILE = "windows.npz"  # in a repository built before libraries: every passage's windows, from the build
WINDOWS_DIR = "windows"  # in a library: windows/<doc>.npz, each document's passages' windows, from the build
Encode = Callable[[list[str]], np.ndarray]


class WindowIndex:
    """Sentence windows and their vectors per passage row, filled lazily or from disk."""

    def __init__(self, state: RepoState, model: str):
        self.state = state
        self.model = model
        self._windows: dict[int, list[Window]] = {}
        self._stored_spans: dict[int, list[tuple[int, int]]] = {}  # spans the disk vectors belong to
        self.vectors: dict[int, np.ndarray] = {}
        self.persist = True  # write on-demand windows back to the disk cache
        self._lock = threading.Lock()
        self._load()

    def path(self):
        from ..offline import cache_root

        safe = re.sub(r"[^A-Za-z0-9]+", "_", self.model)[-40:]
        return cache_root() / "retrieve" / f"{self.state.data_key}-windows-{safe}-{WINDOW_CHARS}-pooled.npz"

    def built_path(self):
        """The repository's own window vectors (embedded by the build), when they were made by
        this model and cut to this size; else None (the cache dir's file is used)."""
        made = self.state.manifest.get("windows") or {}
        path = self.state.root / (WINDOWS_DIR if made.get("per_document") else WINDOWS_FILE)
        if made.get("model") == self.model and made.get("chars") == WINDOW_CHARS and path.exists():
            return path
        return None

    def windows_of(self, row: int) -> list[Window]:
        """The windows of passage `row`, cut once (vectors read from disk for other cuts are dropped)."""
        if row not in self._windows:
            p = self.state.passages[row]
            self._windows[row] = passage_windows(p, self.state.source_text(p.doc_id))
            stored = self._stored_spans.pop(row, None)
            if stored is not None and stored != [(w.start, w.end) for w in self._windows[row]]:
                self.vectors.pop(row, None)  # cut by other code: these vectors are not of these windows
        return self._windows[row]

    def ensure(self, rows: list[int], encode: Encode) -> None:
        """Pool the windows of rows not yet cached, in one pass over their passages."""
        with self._lock:
            wanted = list(dict.fromkeys(rows))
            for row in wanted:
                self.windows_of(row)  # drops disk vectors that belong to another cut
            missing = [r for r in wanted if r not in self.vectors]
            if not missing:
                return
            self._pool(missing, encode)

    def _pool(self, rows: list[int], encode: Encode) -> None:
        """Window vectors of `rows` pooled from one pass over their passages (index.pooling), as
        the build makes them."""
        pool = getattr(encode, "with_spans", None)
        if pool is None:
            raise TypeError("window vectors are pooled from the passages' word pieces: pass an encoder from "
                            "pagerag.index.encoder.encode_function, not a plain function")
        texts, spans = [], []
        for row in rows:
            p = self.state.passages[row]
            texts.append(p.text)  # its source's text[start:end], checked by validate_repository
            spans.append([(w.start - p.start, w.end - p.start) for w in self.windows_of(row)])
        _, vectors = pool(texts, spans)
        first = 0
        for row, row_spans in zip(rows, spans):
            self.vectors[row] = vectors[first:first + len(row_spans)]
            first += len(row_spans)

    def covered(self, rows: list[int]) -> list[int]:
        return [r for r in rows if r in self.vectors]

    def save(self) -> None:
        # Under the lock: a server's other questions add windows while this one writes them, and
        # iterating a dict that grows raises. The temporary file is per thread for the same reason.
        with self._lock:
            rows = sorted(r for r in self.vectors if r in self._windows or r in self._stored_spans)
            spans_of = {r: ([(w.start, w.end) for w in self._windows[r]] if r in self._windows
                            else self._stored_spans[r]) for r in rows}
            counts = [len(spans_of[r]) for r in rows]
            spans = [s for r in rows for s in spans_of[r]]
            dim = next(iter(self.vectors.values())).shape[1] if self.vectors else 0
            vectors = np.concatenate([self.vectors[r] for r in rows]) if rows else np.zeros((0, dim), np.float32)
        path = self.path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.tmp{threading.get_ident()}.npz")
        save_windows(tmp, counts, spans, vectors, rows)
        tmp.replace(path)

    def reload(self) -> None:
        """Forget the in-memory windows and read the disk cache again."""
        self._windows.clear()
        self._stored_spans.clear()
        self.vectors.clear()
        self._load()

    def _load(self) -> None:
        path = self.built_path() or self.path()
        if path.is_dir():
            self._load_documents(path)
            return
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
                self._stored_spans[row] = [tuple(s) for s in span_list[lo:hi]]
                self.vectors[row] = vectors[lo:hi]
        except (OSError, ValueError, KeyError):
            self._stored_spans.clear()
            self.vectors.clear()


    def _load_documents(self, directory) -> None:
        """A library's windows/<doc>.npz: rows found by passage id (a removed document's file is gone)."""
        index = self.state.passage_index
        for doc_id in sorted({p.doc_id for p in self.state.passages}):
            try:
                with np.load(directory / f"{doc_id}.npz") as data:
                    ids, counts, spans, vectors = (data[k] for k in ("passage_ids", "counts", "spans", "vectors"))
            except (OSError, ValueError, KeyError):
                continue  # a question embeds what is missing
            offsets = np.concatenate([[0], np.cumsum(counts)])
            span_list = spans.tolist()
            for i, pid in enumerate(ids.tolist()):
                row = index.get(pid)
                if row is not None:
                    lo, hi = int(offsets[i]), int(offsets[i + 1])
                    self._stored_spans[row] = [tuple(x) for x in span_list[lo:hi]]
                    self.vectors[row] = vectors[lo:hi]


def save_document_windows(repo_dir, doc_id: str, passage_ids: list[str], counts: list[int],
                          spans: list[tuple[int, int]], vectors: np.ndarray) -> None:
    """One document's window spans and vectors, by passage id, in a library's windows/<doc>.npz."""
    directory = repo_dir / WINDOWS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    np.savez(directory / f"{doc_id}.npz", passage_ids=np.asarray(passage_ids), counts=np.asarray(counts, np.int64),
             spans=np.asarray(spans, np.int64).reshape(-1, 2), vectors=np.asarray(vectors, np.float32))


def passage_windows(passage, source: str) -> list[Window]:
    """A passage's sentence windows (`source`: its document's text); the one cut that the build,
    rerank, the judge and the answerer share."""
    return [Window(passage.passage_id, passage.doc_id, passage.file, s, e, source[s:e], sentences)
            for s, e, sentences in cut_windows(source, passage.start, passage.end, WINDOW_CHARS)]


def save_windows(path, counts: list[int], spans: list[tuple[int, int]], vectors: np.ndarray,
                 rows: list[int] | None = None) -> None:
    """The windows of passage `rows` (default: every passage, 0..len(counts)-1) -- how many each
    has, their spans and vectors -- in the one file format `WindowIndex._load` reads (the
    repository's windows.npz and the on-demand cache alike)."""
    rows = list(range(len(counts))) if rows is None else rows
    np.savez(path, rows=np.asarray(rows, np.int64), counts=np.asarray(counts, np.int64),
             spans=np.asarray(spans, np.int64).reshape(-1, 2), vectors=np.asarray(vectors, np.float32))


def window_index(state: RepoState, model: str) -> WindowIndex:
    """The state's window index for embedding model `model` (one per repository version)."""
    return state.memo(("windows", model), lambda: WindowIndex(state, model))


def build_window_index(state: RepoState, model: str, encode: Encode, batch: int = 512) -> WindowIndex:
    """Embed every passage's windows once and keep them on disk (makes rerank ~free per question)."""
    index = window_index(state, model)
    rows = [r for r in range(len(state.passages)) if r not in index.vectors]
    for lo in range(0, len(rows), batch):
        index.ensure(rows[lo : lo + batch], encode)
    index.save()
    return index


def windows_within(state: RepoState, model: str, row: int, start: int, end: int) -> list[Window]:
    """The windows of passage `row` that lie inside [start, end) (a piece of evidence that was cut
    to fit the budget is one of its windows, or a prefix of one: then that piece, whole)."""
    # copies: callers score them, and the index's own windows are shared by every question
    inside = [replace(w) for w in window_index(state, model).windows_of(row) if w.start >= start and w.end <= end]
    if inside:
        return inside
    p = state.passages[row]
    source = state.source_text(p.doc_id)
    return [Window(p.passage_id, p.doc_id, p.file, s, e, source[s:e], sentences)
            for s, e, sentences in cut_windows(source, start, end, WINDOW_CHARS)]
