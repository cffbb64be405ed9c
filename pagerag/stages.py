"""What the build stages share: the resumable stage cache, a document's embedding pass (passages
and their sentence windows), the name embedder that remembers, and the graph stage's record. Used by `library` (the engine of
build, add and remove) and by the distributed executor."""
from __future__ import annotations

import hashlib
import json
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .records import Graph
from .settings import Settings

EMBED_BLOCK = 256  # passages per cached block: a killed build loses at most one block of work


@dataclass
class DocumentParts:
    """What the text stages make of one document."""

    doc: Any  # records.SourceDoc
    passages: list
    vectors: np.ndarray
    mentions: Any = None  # graph.extract_nlp accumulator (None with the LLM extractor)
    windows: Any = None  # WindowTable of its sentence windows (embed.windows), made in the embedding pass


@dataclass
class GraphStage:
    """What the graph stages produce: raw and governed graphs, entity-name vectors per graph,
    the extraction's LLM tokens, and governance's own report."""

    graphs: dict[str, Graph]
    entity_vectors: dict[str, np.ndarray]
    tokens: dict[str, int]
    governance: dict[str, Any]
    summary_keys: dict[str, list[str]] = field(default_factory=dict)  # per kind, each community's content key
    names: Any = None  # graph.name_pairs.NameMemo: the names governance compared, for the next add


class StageCache:
    """Pickled stage outputs beside the repository, keyed by a digest of the stage's inputs."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.hits: list[str] = []
        self._used: set[Path] = set()

    def get_or_compute(self, stage: str, key: str, compute: Callable[[], Any]) -> Any:
        path = self.directory / f"{stage}-{key[:24]}.pkl"
        self._used.add(path)
        if path.is_file():
            try:
                with open(path, "rb") as fh:
                    value = pickle.load(fh)
                self.hits.append(stage)
                return value
            except (OSError, pickle.UnpicklingError, EOFError):
                path.unlink(missing_ok=True)  # a torn write from a killed build: recompute
        value = compute()
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
        return value

    def prune_unused(self) -> None:
        """After a successful build, forget outputs of older inputs so the cache does not grow."""
        for old in self.directory.glob("*.pkl"):
            if old not in self._used:
                old.unlink(missing_ok=True)


def digest(*parts: Any) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else json.dumps(part, sort_keys=True, default=str).encode())
        h.update(b"\x00")
    return h.hexdigest()


def run_timed(timings: dict[str, float], name: str, fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    value = fn()
    timings[name] = round(time.perf_counter() - t0, 3)
    return value


def embed_document(passages, text: str, encoder, settings: Settings, cache: StageCache | None = None,
                   advance: Callable[[int], None] | None = None) -> tuple[np.ndarray, "WindowTable | None"]:
    """One document's passage vectors and (embed.windows) its sentence windows' vectors, pooled
    from the same pass (index.pooling), in blocks of EMBED_BLOCK passages (cached when `cache` is
    given, so a killed build resumes); the local and Ray executors both embed this way."""
    from .retrieve.windows import passage_windows

    cuts = [passage_windows(p, text) for p in passages] if settings.embed.windows else None
    vectors, windows = [], []
    for lo, hi in document_blocks(passages):
        block = passages[lo:hi]
        spans = None if cuts is None else [[(w.start - p.start, w.end - p.start) for w in ws]
                                           for p, ws in zip(block, cuts[lo:hi])]
        key = digest("embed-pooled", settings.embed.model, encoder.backend, encoder.precision, [p.text for p in block], spans)

        def compute(block=block, spans=spans):
            return _embed_block(encoder, [p.text for p in block], spans, settings.embed.batch_size)

        v, w = cache.get_or_compute("embed", key, compute) if cache is not None else compute()
        vectors.append(v)
        windows.append(w)
        if advance:
            advance(hi - lo)
    dim = encoder.dim
    passage_vectors = np.concatenate(vectors) if vectors else np.zeros((0, dim), np.float32)
    if cuts is None:
        return passage_vectors, None
    window_vectors = np.concatenate(windows) if windows else np.zeros((0, dim), np.float32)
    return passage_vectors, WindowTable([p.passage_id for p in passages], [len(ws) for ws in cuts],
                                        [(w.start, w.end) for ws in cuts for w in ws], window_vectors,
                                        settings.embed.model)


def _embed_block(encoder, texts: list[str], spans, batch_size: int) -> tuple[np.ndarray, np.ndarray | None]:
    if spans is None:
        return encoder.encode(texts, batch_size=batch_size), None
    from .index.pooling import encode_with_spans

    return encode_with_spans(encoder, texts, spans, batch_size)


def document_blocks(passages) -> list[tuple[int, int]]:
    """(lo, hi) index ranges of at most EMBED_BLOCK passages, never across a document."""
    out, lo = [], 0
    for i in range(1, len(passages) + 1):
        if i == len(passages) or passages[i].doc_id != passages[lo].doc_id or i - lo == EMBED_BLOCK:
            out.append((lo, i))
            lo = i
    return out


@dataclass
class WindowTable:
    """Window spans and vectors of some passages (by id), as the build writes them: one file per
    document (windows/<doc>.npz), so adding a document writes only its own."""

    passage_ids: list[str]
    counts: list[int]
    spans: list[tuple[int, int]]
    vectors: np.ndarray
    model: str

    def info(self) -> dict[str, Any]:
        from .retrieve.windows import WINDOW_CHARS

        # "pooled": from the passages' word pieces (index.pooling); older builds embedded each window
        return {"model": self.model, "chars": WINDOW_CHARS, "per_document": True, "vectors": "pooled"}

    @property
    def per_document(self) -> dict[str, int]:
        """Windows per document id."""
        out: dict[str, int] = {}
        for pid, n in zip(self.passage_ids, self.counts):
            doc_id = pid.rsplit(":", 1)[0]
            out[doc_id] = out.get(doc_id, 0) + n
        return out

    def write(self, repo_dir: Path) -> None:
        from .retrieve.windows import save_document_windows

        offsets = np.concatenate([[0], np.cumsum(self.counts)]).astype(int)
        by_doc: dict[str, list[int]] = {}
        for i, pid in enumerate(self.passage_ids):
            by_doc.setdefault(pid.rsplit(":", 1)[0], []).append(i)
        for doc_id, idx in by_doc.items():
            spans = [s for i in idx for s in self.spans[offsets[i]:offsets[i + 1]]]
            vectors = np.concatenate([self.vectors[offsets[i]:offsets[i + 1]] for i in idx])
            save_document_windows(repo_dir, doc_id, [self.passage_ids[i] for i in idx],
                                  [self.counts[i] for i in idx], spans, vectors)


class MemoEmbedder:
    """An embedder that remembers every text it has embedded (and any it is told of)."""

    def __init__(self, embedder):
        self._embedder = embedder
        self._memo: dict[str, np.ndarray] = {}

    def remember(self, texts: list[str], vectors: np.ndarray) -> None:
        for text, vector in zip(texts, vectors):
            self._memo.setdefault(text, vector)

    def encode(self, texts: list[str], batch_size: int = 256, **_: Any) -> np.ndarray:
        new = sorted({t for t in texts if t not in self._memo})
        if new:
            for text, vector in zip(new, self._embedder.encode(new, batch_size=batch_size)):
                self._memo[text] = vector
        if not texts:
            return np.zeros((0, self._embedder.dim), dtype=np.float32)
        return np.stack([self._memo[t] for t in texts])


def embed_name_vectors(graphs: dict[str, Graph], embedder: MemoEmbedder) -> dict[str, np.ndarray]:
    """Name vectors for entity linking; the governed names are mostly raw names, so each distinct
    name is embedded once."""
    names = sorted({e.name for g in graphs.values() for e in g.entities})
    vectors = embedder.encode(names, batch_size=256)
    row = {name: i for i, name in enumerate(names)}
    return {kind: vectors[[row[e.name] for e in g.entities]] if g.entities else np.zeros((0, vectors.shape[1]), np.float32)
            for kind, g in graphs.items()}
