"""The encoder factory, the one place that picks the text encoder: `embed.backend` (auto |
openvino | onnx | torch) and `embed.precision` (auto | fp32 | bf16 | int8) are decided here, once.

    encoder = get_encoder(settings.embed)     # open_encoder's, once per process
                                              # .encode(texts, batch_size=, progress=) -> unit vectors
                                              # .token_batches(...) -> word-piece states (index.pooling)
    encoder.backend, encoder.precision        # what embedded the vectors (the manifest records it)

The backends are leaves that import neither each other nor this module (pyproject's import-linter
contract): torch_encoder, onnx_encoder and openvino_encoder (the last two share exported.py's
tokenization and batching), and onnx_export, which exports, checks and quantises the file the
onnx and openvino backends run. Only this module calls them, in one order: choose the backend and
precision (`choose`, exporting the model when the ONNX file is needed), then open the backend.

`onnx` runs the model with ONNX Runtime and `tokenizers` (no torch import: a cold question
starts fast); it is exported from the model once, with torch, into the cache (see
`onnx_export`). `openvino` runs the same exported file with OpenVINO, in bf16 where the CPU
computes bf16 natively (AMX, AVX512-BF16): ~2.5x faster than ONNX Runtime's fp32 on this
machine, which has no bf16 on x86. `torch` is the sentence-transformers reference path.
`auto` = openvino when it is installed and the model exports, else onnx, else torch (with a
one-line note).

Precision `auto` = bf16 for openvino and torch on CPUs with native bf16, else fp32; fp32 for
onnx. int8 (onnx) is opt-in: ~30% less CPU than ONNX fp32 and a median cosine of 0.997 to fp32,
but its worst passages fall to 0.987 (Moby Dick) and it moves top-10 retrieval neighbours
(overlap with torch 0.90-0.955 on three books, against 1.000 for ONNX fp32 and ~0.995 for bf16;
see benchmarks/embed_speed.py). fp32 and bf16 vectors of every backend agree to a cosine >=
0.9999, so a repository built with one can be queried with another.
"""
from __future__ import annotations

import functools
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import numpy as np

from ..errors import ConfigError
from ..settings import EmbedSettings
from .embedding_model import resolve_model_path
from .onnx_export import ensure_export

Encode = Callable[[list[str]], np.ndarray]
BACKENDS = ("auto", "openvino", "onnx", "torch")
ONNX_PRECISIONS = ("fp32", "int8")


class Encoder(Protocol):
    """What every backend is: torch_encoder.Embedder, onnx_encoder.OnnxEncoder, openvino_encoder.OpenVinoEncoder."""

    backend: str  # openvino | onnx | torch
    precision: str  # bf16 | fp32 | int8
    dim: int
    max_seq_length: int

    def encode(self, texts: list[str], batch_size: int = 0,
               progress: Callable[[int], None] | None = None) -> np.ndarray: ...

    def token_batches(self, texts: list[str], batch_size: int = 0,
                      progress: Callable[[int], None] | None = None) -> Iterator[tuple]: ...

    def release_memory(self) -> None: ...


@dataclass(frozen=True)
class Choice:
    backend: str  # openvino | onnx | torch
    precision: str  # bf16 | fp32 (openvino, torch) | fp32 | int8 (onnx)
    why: str


def open_encoder(embed: EmbedSettings) -> Encoder:
    """The encoder the settings ask for: the backend and its precision chosen (`choose`; the ONNX
    file exported once per machine), then that backend opened on the model (torch's model is
    loaded once per process)."""
    return _open(embed.model, embed.backend, embed.precision, embed.threads)


def get_encoder(embed: EmbedSettings) -> Encoder:
    """`open_encoder(embed)`, opened once per process: what builds and questions use (an opening
    that `prefetch_encoder` started is waited for, not repeated)."""
    with _OPENING:
        return _opened(embed.model, embed.backend, embed.precision, embed.threads)


def prefetch_encoder(embed: EmbedSettings) -> None:
    """Start opening the encoder (`get_encoder(embed)`) in a background thread: a cold question
    overlaps the runtime's import and the model's compilation with reading the repository. A
    failure is left for the caller's own `get_encoder`, which meets it again and reports it."""
    def run() -> None:
        try:
            get_encoder(embed)
        except BaseException:  # noqa: BLE001 - reported by the caller's get_encoder
            pass

    # not a daemon: a process leaving (an early error) while this thread is in the runtime's
    # native code ended in "terminate called without an active exception"; the exit waits for it
    threading.Thread(target=run, name="encoder-load").start()


def encode_function(embed: EmbedSettings) -> "TextEncode":
    """`get_encoder(embed).encode` as a plain function of a list of texts (query-time code), with
    `.with_spans` for window vectors pooled from the texts' word pieces (index.pooling)."""
    return TextEncode(get_encoder(embed), embed.batch_size)


class TextEncode:
    """texts -> unit vectors; `with_spans(texts, spans)` -> (text vectors, span vectors)."""

    def __init__(self, encoder: Encoder, batch_size: int):
        self.encoder = encoder
        self.batch_size = batch_size

    def __call__(self, texts: list[str]) -> np.ndarray:
        return self.encoder.encode(list(texts), batch_size=self.batch_size)

    def with_spans(self, texts: list[str], spans: list[list[tuple[int, int]]]) -> tuple[np.ndarray, np.ndarray]:
        from .pooling import encode_with_spans

        return encode_with_spans(self.encoder, texts, spans, self.batch_size)


def describe(encoder: Encoder) -> dict[str, Any]:
    """What embedded a repository's vectors: recorded in its manifest."""
    out = {"backend": encoder.backend, "precision": encoder.precision, "dim": int(encoder.dim),
           "max_seq_length": int(encoder.max_seq_length)}
    if encoder.backend in ("onnx", "openvino"):
        out["onnx_sha256"] = encoder.sha256
    return out


def _open(model: str, backend: str, precision: str, threads: int) -> Encoder:
    choice = choose(model, backend, precision)
    if choice.why:
        _note_once(choice.why)
    if choice.backend == "torch":
        from .torch_encoder import get_embedder

        return get_embedder(model, threads, choice.precision)
    model_dir = resolve_model_path(model)
    export = ensure_export(str(model_dir))  # checked by `choose` already: a stat per file
    path = export["paths"]["fp32" if choice.backend == "openvino" else choice.precision]
    sha256 = export["files"][Path(path).name]["sha256"]
    if choice.backend == "openvino":
        from .openvino_encoder import OpenVinoEncoder

        return OpenVinoEncoder(model_dir, path, threads, choice.precision, sha256=sha256,
                               cache_dir=Path(path).parent / "openvino")
    from .onnx_encoder import OnnxEncoder

    return OnnxEncoder(model_dir, path, threads, choice.precision, sha256=sha256)


_opened = functools.lru_cache(maxsize=8)(_open)
_OPENING = threading.RLock()  # one opening at a time: a second caller waits for the first's encoder


def choose(model: str, backend: str, precision: str) -> Choice:
    """Resolve `auto`s; raise ConfigError for a combination that cannot run."""
    if backend not in BACKENDS:
        raise ConfigError(f"unknown embed.backend '{backend}' (choose {', '.join(BACKENDS)})")
    if backend == "torch":
        return Choice("torch", _torch_precision(precision), "")
    if backend == "openvino" and not _openvino_installed():
        raise ConfigError("embed.backend = openvino: openvino is not installed (pip install openvino)")
    openvino = backend == "openvino" or (backend == "auto" and precision != "int8" and _openvino_installed()
                                         and (precision != "bf16" or cpu_has_bf16()))
    if backend == "auto" and precision == "bf16" and not openvino:
        return Choice("torch", _torch_precision(precision), "")  # torch's autocast: the other bf16 path
    if not openvino and precision not in ("auto", *ONNX_PRECISIONS):
        raise ConfigError(f"embed.precision = {precision} needs embed.backend = openvino or torch (onnx runs fp32 or int8)")
    problem = _onnx_problem(model)  # both runtimes run the checksummed export: checked once
    if problem and backend != "auto":
        raise ConfigError(f"embed.backend = {backend}: {problem}")
    if problem:
        return Choice("torch", _torch_precision("auto" if precision == "int8" else precision),
                      f"embed.backend = auto uses torch: {problem}")
    if openvino:
        return Choice("openvino", _openvino_precision(precision), "")
    return Choice("onnx", _onnx_precision(model, precision), "")


def _openvino_installed() -> bool:
    import importlib.util

    # Found, not imported: choosing runs before a cold ask's first line, and the import costs ~0.3 s
    return importlib.util.find_spec("openvino") is not None


def _openvino_precision(precision: str) -> str:
    if precision == "int8":
        raise ConfigError("embed.precision = int8 needs embed.backend = onnx (openvino runs bf16 or fp32)")
    if precision == "bf16" and not cpu_has_bf16():
        raise ConfigError("embed.precision = bf16: this CPU has no native bf16 (AMX or AVX512-BF16); use fp32")
    return resolve_precision(precision)


def _onnx_problem(model: str) -> str:
    """Why the ONNX path cannot run here ('' when it can): no onnxruntime, or a failed export."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return "onnxruntime is not installed (pip install onnxruntime)"
    try:
        ensure_export(str(resolve_model_path(model)))
    except ConfigError as exc:
        return str(exc)
    except Exception as exc:  # an exporter failure must not stop a build that torch can do
        return f"the ONNX export failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
    return ""


def _onnx_precision(model: str, precision: str) -> str:
    if precision == "int8" and "int8" not in ensure_export(str(resolve_model_path(model)))["paths"]:
        raise ConfigError("embed.precision = int8: the int8 export failed its check against fp32; use fp32")
    return "fp32" if precision == "auto" else precision


def _torch_precision(precision: str) -> str:
    if precision == "int8":
        raise ConfigError("embed.precision = int8 needs embed.backend = onnx (torch runs fp32 or bf16)")
    return resolve_precision(precision)


def cpu_has_bf16() -> bool:
    """True when the CPU computes bf16 natively (AMX or AVX512-BF16); elsewhere bf16 is slower."""
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="ignore")
    except OSError:
        return False
    return " amx_bf16" in flags or " avx512_bf16" in flags


def resolve_precision(precision: str) -> str:
    """`auto` for the bf16-capable backends (openvino, torch): bf16 where the CPU computes it natively, else fp32."""
    if precision == "auto":
        return "bf16" if cpu_has_bf16() else "fp32"
    return precision


@functools.lru_cache(maxsize=None)
def _note_once(message: str) -> None:
    sys.stderr.write(f"note: {message}\n")
