"""The onnx backend: sentence vectors with ONNX Runtime and `tokenizers`, the packaged MiniLM
without torch. A leaf: the factory (index.encoder) gives it the file `onnx_export.ensure_export`
verified; tokenization, batching and outputs are `exported.ExportedEncoder`'s, shared with the
openvino backend; only the runtime is this module's.
"""
from __future__ import annotations

import numpy as np

from .exported import ExportedEncoder, cpu_session, give_back_free_heap


class OnnxEncoder(ExportedEncoder):
    """encode(texts) -> float32 unit vectors, as SentenceTransformer(model).encode(normalize=True)."""

    backend = "onnx"

    def _open(self, onnx_path: str, threads: int) -> None:
        self.session = cpu_session(onnx_path, threads)
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def _infer(self, outputs: list[str], ids: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
        """The model's named outputs for one padded batch (the runtime's only job)."""
        return self.session.run(outputs, {"input_ids": ids, "attention_mask": mask})

    def release_memory(self) -> None:
        """Give back the memory arena's free blocks. ONNX Runtime keeps the arena grown to the
        widest batch it ran (~70 MB for 2,048-piece passage batches) for the session's next call;
        after a build's passage pass the next calls embed short names, and the arena would
        otherwise sit under the graph stages' peak."""
        import onnxruntime as ort

        options = ort.RunOptions()
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        ids = np.array([[0]], dtype=np.int64)
        self.session.run(["embedding"], {"input_ids": ids, "attention_mask": np.ones_like(ids)}, options)
        give_back_free_heap()
