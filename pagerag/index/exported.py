"""What the exported model's runtimes share: the tokenizer, the padding-aware batches and the
outputs of the graph `onnx_export` writes (input_ids, attention_mask -> unit sentence vectors
`embedding` and the word pieces' states `tokens`). A runtime subclass supplies `_open` (load the
file) and `_infer` (run one padded batch): onnx_encoder (ONNX Runtime), openvino_encoder
(OpenVINO), and the export's own check.

The tokenizer is the model's own tokenizer.json, truncated at the model's max_seq_length (256 word
pieces for all-MiniLM-L6-v2) exactly as sentence-transformers does; mean pooling and L2
normalisation are inside the exported graph, so a forward pass returns unit vectors; the graph's
second output, the word pieces' states, is what the sentence windows are pooled from
(`token_batches`, pooling.py).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import numpy as np

# Word pieces per batch, padding included. Measured on a book's passages (benchmarks/embed_speed.py):
# 8 full passages per batch took the least CPU; 64 took 25% more (wider padding, colder caches).
TOKENS_PER_BATCH = 2048
# A forward pass costs about as much as this many word pieces before it reads any (~5 ms here;
# each word piece ~0.19 ms on 2 cores): a batch ends early where padding the shorter texts that
# follow to its width would cost more than a pass of their own (a question's short name mentions
# after the question itself).
PASS_COST_TOKENS = 24


class ExportedEncoder:
    """encode(texts) -> float32 unit vectors, as SentenceTransformer(model).encode(normalize=True)."""

    backend = ""  # the runtime's name (the manifest records it)

    def __init__(self, model_dir: Path, onnx_path: str, threads: int = 0, precision: str = "fp32", sha256: str = ""):
        from tokenizers import Tokenizer

        self.precision = precision
        self.sha256 = sha256  # of the .onnx file, verified by onnx_export before it gets here
        self.max_seq_length = _max_seq_length(model_dir)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_seq_length)
        self.tokenizer.no_padding()
        self._open(onnx_path, threads or os.cpu_count() or 1)

    def _open(self, onnx_path: str, threads: int) -> None:
        """Load the exported file with `threads` threads; set `self.dim`."""
        raise NotImplementedError

    def _infer(self, outputs: list[str], ids: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
        """The model's named outputs for one padded batch (the runtime's only job)."""
        raise NotImplementedError

    def release_memory(self) -> None:
        """Give back what the runtime holds beyond the next call's needs (nothing here)."""

    def encode(self, texts: list[str], batch_size: int = 0, progress: Callable[[int], None] | None = None) -> np.ndarray:
        """float32 unit vectors, one row per text; `progress(n)` is called after each batch.

        A batch holds `batch_size` texts, or with 0 as many as fit in TOKENS_PER_BATCH word pieces
        with padding: 8 full passages, or hundreds of entity names."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(texts)
        for idx in self._ordered_batches(encodings, batch_size):
            out[idx] = self._run(["embedding"], [encodings[i].ids for i in idx])[0]
            if progress:
                progress(len(idx))
        return out

    def token_batches(self, texts: list[str], batch_size: int = 0, progress: Callable[[int], None] | None = None):
        """Per batch: the texts' indices, their unit vectors and each text's TokenStates (what
        pooling.encode_with_spans pools the sentence windows from)."""
        from .pooling import TokenStates, read_to

        texts = list(texts)
        encodings = self.tokenizer.encode_batch(texts)
        for idx in self._ordered_batches(encodings, batch_size):
            vectors, tokens = self._run(["embedding", "tokens"], [encodings[i].ids for i in idx])
            states = []
            for row, i in enumerate(idx.tolist()):
                e = encodings[i]
                states.append(TokenStates(tokens[row, : len(e.ids)], np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2),
                                          read_to(e.offsets, len(texts[i]), bool(e.overflowing))))
            yield idx, vectors, states
            if progress:
                progress(len(idx))

    def _ordered_batches(self, encodings, batch_size: int):
        # Longest first, similar lengths together: little padding, and the widest batch (largest
        # allocations) comes first.
        lengths = [len(e.ids) for e in encodings]
        order = np.argsort([-n for n in lengths], kind="stable")
        return _batches(order, lengths, batch_size)

    def _run(self, outputs: list[str], batch_ids: list[list[int]]) -> list[np.ndarray]:
        width = max(len(ids) for ids in batch_ids)
        ids = np.zeros((len(batch_ids), width), dtype=np.int64)
        mask = np.zeros((len(batch_ids), width), dtype=np.int64)
        for row, seq in enumerate(batch_ids):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        return [a.astype(np.float32, copy=False) for a in self._infer(outputs, ids, mask)]


def cpu_session(onnx_path: str, threads: int):
    """An ONNX Runtime CPU session as every exported encoder runs one: one graph at a time
    (parallelism is inside each MatMul), idle workers sleep instead of spinning (on a shared 2-core
    machine a spinning pool steals the CPU the other threads and processes need), quiet logs."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])


def give_back_free_heap() -> None:
    """Return the C heap's free memory to the system. glibc keeps what the runtime's threads freed
    in their own arenas, where RSS still counts it: after a book's passage pass ~90-110 MB
    (Moby Dick, either runtime; one-off measurement), which would otherwise sit under the
    graph stages' peak."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: its allocator keeps its own counsel


def _batches(order: np.ndarray, lengths: list[int], batch_size: int):
    """Consecutive slices of `order` (longest first): `batch_size` texts each, or (0) as many as
    keep width x count within TOKENS_PER_BATCH, ended early where padding would cost more than
    a pass of its own (_narrowing)."""
    lo = 0
    while lo < len(order):
        if batch_size:
            hi = lo + batch_size
        else:
            width = max(lengths[order[lo]], 1)  # the first text of a batch is its widest
            hi = _narrowing(order, lengths, lo, min(len(order), lo + max(1, TOKENS_PER_BATCH // width)), width)
        yield order[lo:hi]
        lo = hi


def _narrowing(order: np.ndarray, lengths: list[int], lo: int, hi: int, width: int) -> int:
    """Where the batch order[lo:hi] should end: at the first text whose padding to `width`,
    counted over it and the texts after it, costs more than a pass of their own."""
    for j in range(lo + 1, hi):
        if (width - lengths[order[j]]) * (hi - j) > PASS_COST_TOKENS:
            return j
    return hi


def _max_seq_length(model_dir: Path, default: int = 256) -> int:
    config = model_dir / "sentence_bert_config.json"
    try:
        return int(json.loads(config.read_text()).get("max_seq_length", default))
    except (OSError, ValueError, TypeError):
        return default
