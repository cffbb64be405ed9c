"""Passage-level multi-hop data for the RCS evaluation: load, embed once (cached), retrieve.

Each corpus entry is one passage (title + text, no chunking). Retrieval is exact brute-force
cosine in numpy: for 6k x 384 float32 unit vectors a full matrix product takes milliseconds and
has no approximation error, which an ANN index would add to the very scores RCS reads.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ...errors import PageRAGError


@dataclass
class MultiHopQuery:
    qid: str
    question: str
    answers: list[str]
    gold_pids: list[str]


@dataclass
class PassageCorpus:
    pids: list[str]
    titles: list[str]
    texts: list[str]
    sha256: str
    index_of: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index_of = {pid: i for i, pid in enumerate(self.pids)}

    def passage_text(self, i: int) -> str:
        """What is embedded and searched: the title, then the text."""
        return f"{self.titles[i]}. {self.texts[i]}" if self.titles[i] else self.texts[i]


def _parse_jsonl(text: str, path: Path, what: str) -> list[dict]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise PageRAGError(f"{path}:{n}: invalid JSON in {what}: {exc.msg}") from None
    return rows


def _read_bytes(path: Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise PageRAGError(f"{path}: cannot read {what}: {exc.strerror}") from None


def _read_jsonl(path: Path, what: str) -> list[dict]:
    return _parse_jsonl(_read_bytes(path, what).decode("utf-8"), path, what)


def load_queries(path: Path, limit: int | None = None) -> list[MultiHopQuery]:
    rows = _read_jsonl(path, "queries")
    out = []
    for row in rows[:limit] if limit else rows:
        try:
            out.append(MultiHopQuery(str(row["qid"]), row["question"], list(row.get("answers", [])),
                                     [str(p) for p in row["gold_pids"]]))
        except KeyError as exc:
            raise PageRAGError(f"{path}: query without field {exc} (need qid, question, gold_pids)") from None
    return out


def load_corpus(path: Path) -> PassageCorpus:
    raw = _read_bytes(path, "corpus")
    rows = _parse_jsonl(raw.decode("utf-8"), path, "corpus")
    try:
        return PassageCorpus([str(r["pid"]) for r in rows], [r.get("title") or "" for r in rows],
                             [r["text"] for r in rows], hashlib.sha256(raw).hexdigest())
    except KeyError as exc:
        raise PageRAGError(f"{path}: passage without field {exc} (need pid, text)") from None


def _cache_path(corpus: PassageCorpus, model: str) -> Path:
    from ...offline import cache_root

    slug = hashlib.sha256(model.encode()).hexdigest()[:10]
    directory = cache_root() / "rcs"
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{corpus.sha256}-{slug}.npy"


def embed_corpus(corpus: PassageCorpus, model: str = "packaged:all-MiniLM-L6-v2",
                 progress: Callable[[int], None] | None = None) -> np.ndarray:
    """float32 unit vectors of every passage, cached on disk by corpus sha256 and model name."""
    path = _cache_path(corpus, model)
    if path.is_file():
        vecs = np.load(path)
        if vecs.shape[0] == len(corpus.pids):
            return vecs
    from ...index.torch_encoder import get_embedder

    vecs = get_embedder(model).encode([corpus.passage_text(i) for i in range(len(corpus.pids))],
                                      progress=progress)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, vecs)
    tmp.replace(path)  # atomic: a concurrent run never reads half an array
    return vecs


def embed_queries(texts: list[str], model: str = "packaged:all-MiniLM-L6-v2") -> np.ndarray:
    from ...index.torch_encoder import get_embedder

    return get_embedder(model).encode(texts)


def dense_topk(query_vecs: np.ndarray, passage_vecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, float64 cosines) of the k best passages per query, best first (exact search)."""
    sims = query_vecs.astype(np.float64) @ passage_vecs.astype(np.float64).T
    k = min(k, sims.shape[1])
    part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    rows = np.arange(sims.shape[0])[:, None]
    order = np.argsort(-sims[rows, part], axis=1, kind="stable")
    idx = part[rows, order]
    return idx, sims[rows, idx]
