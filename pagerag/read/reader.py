"""The reader: a small cross-encoder that reads a question against one sentence of the book (in
its context) and says how likely the sentence states the answer, and where in it the answer is.

    reader = packaged_reader()                 # pagerag/read/model/, checksummed, loaded once
    reads = reader.read(question, [around(source, start, end), ...])
    reads[0].p, reads[0].span, reads[0].margin

One forward pass gives both heads of the model (trained here on the training books:
`python -m pagerag.train.reader`): `p`, P(this sentence states the answer), and an answer span
over the sentence's word pieces, SQuAD 2.0 style, whose `margin` is its score minus the
"no answer here" score at [CLS]. The model runs in ONNX Runtime (int8 weights) with the
tokenizer it was trained with; nothing is downloaded and torch is not imported.
"""
from __future__ import annotations

import json
import os
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import PageRAGError
from ..resources import sha256_of
from .inputs import Limits, Pair, PairEncoder, Passage, batch_arrays

MODEL_DIR = Path(__file__).with_name("model")
MODEL_FILE, TOKENIZER_FILE, METADATA = "reader.onnx", "tokenizer.json", "reader.json"
MAX_SPAN_TOKENS = 30  # the longest answer span considered (word pieces)
TOKENS_PER_BATCH = 1536  # word pieces per forward pass, padding included


@dataclass
class Read:
    """What the reader says of one sentence."""

    p: float  # P(the sentence states the answer)
    span: tuple[int, int] | None  # (start, end) of the best answer span in the sentence text
    margin: float  # the span's score minus the no-answer score (> 0: the span beats "no answer")



def load_metadata(directory: Path) -> dict:
    """The model's metadata, after checking that its files are the ones it names (sha256)."""
    directory = Path(directory)
    try:
        meta = json.loads((directory / METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PageRAGError(f"reader model: cannot read {directory / METADATA} ({exc.__class__.__name__}); "
                           "reinstall pagerag or retrain with `python -m pagerag.train.reader`") from None
    for name in (MODEL_FILE, TOKENIZER_FILE):
        path, expected = directory / name, meta.get("sha256", {}).get(name)
        if not path.is_file():
            raise PageRAGError(f"reader model: {path} is missing; reinstall pagerag")
        if sha256_of(path) != expected:
            raise PageRAGError(f"reader model: {path} does not match its checksum in {METADATA} "
                               "(damaged or replaced); reinstall pagerag")
    return meta


class Reader:
    """An ONNX reader model directory (MODEL_FILE, TOKENIZER_FILE, METADATA), verified on load."""

    def __init__(self, directory: Path = MODEL_DIR, threads: int = 0):
        import onnxruntime as ort

        self.directory = Path(directory)
        self.meta = load_metadata(self.directory)
        self.encoder = PairEncoder(self.directory / TOKENIZER_FILE, Limits(**self.meta.get("limits", {})))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or os.cpu_count() or 1
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # a shared 2-core machine
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(self.directory / MODEL_FILE), options,
                                            providers=["CPUExecutionProvider"])

    @property
    def version(self) -> str:
        return str(self.meta.get("sha256", {}).get(MODEL_FILE, ""))[:12]

    def read(self, question: str, passages: Sequence[Passage]) -> list[Read]:
        """One Read per passage, in order."""
        pairs = self.encoder.encode(question, passages)
        out: list[Read | None] = [None] * len(pairs)
        for idx in _batches([len(p.ids) for p in pairs]):
            batch = [pairs[i] for i in idx]
            ids, mask, types = batch_arrays(batch, self.encoder.pad)
            has, start, end = self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
            for row, i in enumerate(idx):
                out[i] = _decode(pairs[i], float(has[row]), start[row], end[row])
        return out  # type: ignore[return-value]


def _batches(lengths: list[int]):
    """Indices in batches of similar length (longest first) of at most TOKENS_PER_BATCH pieces."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    lo = 0
    while lo < len(order):
        hi = lo + max(1, TOKENS_PER_BATCH // max(lengths[order[lo]], 1))
        yield order[lo:hi]
        lo = hi


def _decode(pair: Pair, has_logit: float, start: np.ndarray, end: np.ndarray) -> Read:
    p = float(1.0 / (1.0 + np.exp(-has_logit)))
    null = float(start[0] + end[0])
    if not pair.offsets:
        return Read(p, None, -1e9)
    s = start[pair.first: pair.last + 1].astype(np.float64)
    e = end[pair.first: pair.last + 1].astype(np.float64)
    n = s.size
    scores = s[:, None] + e[None, :]
    valid = np.triu(np.ones((n, n), dtype=bool)) & ~np.triu(np.ones((n, n), dtype=bool), k=MAX_SPAN_TOKENS)
    scores = np.where(valid, scores, -np.inf)
    i, j = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return Read(p, (int(pair.offsets[i][0]), int(pair.offsets[j][1])), float(scores[i, j]) - null)


_LOADS: dict[str, Future] = {}
_LOADS_LOCK = threading.Lock()


def packaged_reader(directory: str = "") -> Reader:
    """The reader shipped in the package (or the model directory given), loaded once per process;
    a load `prefetch_reader` started is waited for, not repeated."""
    future, mine = _claim(directory)
    if mine:
        _load_into(future, directory)
    return future.result()


def prefetch_reader(directory: str = "") -> None:
    """Start loading the reader in a background thread (its checksum and ONNX session), so a cold
    `ask` overlaps it with opening the repository and retrieving."""
    future, mine = _claim(directory)
    if mine:
        # not a daemon: a process leaving while ONNX Runtime builds the session (an early error) ended in
        # "terminate called without an active exception"; its exit waits for the load instead
        threading.Thread(target=_load_into, args=(future, directory), name="reader-load").start()


def forget_readers() -> None:
    """Drop the loaded readers (tests that change a model directory)."""
    with _LOADS_LOCK:
        _LOADS.clear()


def _claim(directory: str) -> tuple[Future, bool]:
    with _LOADS_LOCK:
        if directory in _LOADS:
            return _LOADS[directory], False
        _LOADS[directory] = Future()
        return _LOADS[directory], True


def _load_into(future: Future, directory: str) -> None:
    try:
        future.set_result(Reader(Path(directory) if directory else MODEL_DIR))
    except BaseException as exc:  # handed to whoever waits; a later call tries again
        with _LOADS_LOCK:
            _LOADS.pop(directory, None)
        future.set_exception(exc)
