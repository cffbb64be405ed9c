"""The openvino backend: sentence vectors with OpenVINO, the same exported ONNX file as the onnx
backend, in bf16 on CPUs that compute bf16 natively (AMX, AVX512-BF16), else fp32. A leaf: the
factory (index.encoder) chooses it and its precision.

Why a second runtime: ONNX Runtime has no bf16 kernels on x86, and on this machine's Xeon (AMX)
OpenVINO's bf16 runs a book's passage pass ~2.5x faster than ONNX Runtime's fp32 for ~35 MB more
memory (benchmarks/embed_speed.py); its vectors keep a cosine >= 0.9999 to fp32, as torch's bf16
does. Tokenization, batching, outputs and pooling are `exported.ExportedEncoder`'s, as the
onnx backend's; only the runtime differs.

Deterministic where the repository needs it: the same batch gives the same vectors on every run,
in every process and with any thread count, and a text's vector does not depend on the other
texts in its batch; it moves by up to ~1e-3 with the width its batch is padded to (bf16
rounding), which a build fixes (blocks of one document, batched by length).

Compiled models go to OpenVINO's model cache beside the export (`<export>/openvino/`), so a
process after the first compiles in ~0.5 s instead of ~1 s.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ..resources import cache_lock
from .exported import ExportedEncoder, give_back_free_heap

PRECISION_HINT = {"bf16": "bf16", "fp32": "f32"}
# Batches are padded to a multiple of this many word pieces. OpenVINO prepares its kernels for
# each input shape it has not seen (~40 ms a shape here); a book's passage pass has a batch
# width for every length from 1 to 256 word pieces, which cost its first pass ~80% more time
# (800 Moby Dick passages: 20.5 s, then 12.1 s with the same shapes again; 11.3 s padded to 16).
WIDTH_STEP = 16


class OpenVinoEncoder(ExportedEncoder):
    backend = "openvino"

    def __init__(self, model_dir: Path, onnx_path: str, threads: int = 0, precision: str = "bf16", sha256: str = "",
                 cache_dir: Path | None = None):
        self._cache_dir = cache_dir
        super().__init__(model_dir, onnx_path, threads, precision, sha256)

    def _open(self, onnx_path: str, threads: int) -> None:
        from ..offline import import_openvino

        ov = import_openvino()

        config = {
            "INFERENCE_PRECISION_HINT": PRECISION_HINT[self.precision],
            "INFERENCE_NUM_THREADS": threads,
            "PERFORMANCE_HINT": "LATENCY",  # one stream: a batch uses every thread
            # Threads are not pinned to cores: spaCy's workers and the server's threads share them.
            "ENABLE_CPU_PINNING": False,
        }
        if self._cache_dir is None:
            self._compile = lambda: ov.Core().compile_model(onnx_path, "CPU", config)
        else:
            config["CACHE_DIR"] = str(self._cache_dir)
            self._compile = lambda: self._compile_through_cache(ov, onnx_path, config)
        self.model = self._compile()
        self.dim = int(self.model.output("embedding").get_partial_shape()[-1].get_length())
        self._local = threading.local()  # an infer request serves one thread at a time
        self._guard = threading.Lock()  # the model, and how many threads are inferring with it
        self._busy = 0

    def _compile_through_cache(self, ov, onnx_path: str, config: dict):
        # OpenVINO writes its cache blob without a lock of its own: two processes compiling the
        # same model first at once failed with "cannot set permissions" on the blob.
        with cache_lock(self._cache_dir):
            return ov.Core().compile_model(onnx_path, "CPU", config)

    def _infer(self, outputs: list[str], ids: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
        with self._guard:
            if self.model is None:  # released after a passage pass: compiled again (from the cache, ~0.5 s)
                self.model = self._compile()
            model, self._busy = self.model, self._busy + 1
            request = getattr(self._local, "request", None)
            if request is None:
                request = self._local.request = model.create_infer_request()
        try:
            width = ids.shape[1]
            wide = -(-width // WIDTH_STEP) * WIDTH_STEP
            if wide != width:
                ids, mask = (np.pad(a, ((0, 0), (0, wide - width))) for a in (ids, mask))
            result = request.infer({"input_ids": ids, "attention_mask": mask})  # copies the outputs out
            return [result[model.output(name)][:, :width] if name == "tokens" else result[model.output(name)]
                    for name in outputs]
        finally:
            with self._guard:
                self._busy -= 1

    def release_memory(self) -> None:
        """Give back everything the compiled model holds: after a build's passage pass, until the
        next text, which compiles it again from the model cache. The compiled model with its
        per-shape kernels holds ~150 MB more than ONNX Runtime's session after a book's pass,
        and spaCy's worker processes are started from this one next (the build's peak).

        The model is let go, not released in place (`CompiledModel.release_memory`, which OpenVINO
        allows only while no request runs: it crashed a test worker once, in an add's graph stages,
        in a process whose other threads had used the encoder; `pagerag serve` runs build jobs
        beside its queries). While another thread infers, the model stays."""
        with self._guard:
            if self._busy:
                return
            self.model, self._local = None, threading.local()  # the requests go with their thread-local
        give_back_free_heap()
