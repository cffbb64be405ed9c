"""Export a sentence-transformers BERT model to ONNX once, into the cache, checksummed.

The export is the only step of the ONNX path that needs torch: the model (BERT + mean pooling +
L2 normalisation) is traced with torch's TorchScript exporter (`dynamo=False`: it needs no
`onnxscript`), checked against sentence-transformers, and then quantised to int8 with ONNX
Runtime's dynamic quantisation. Everything lands in `<cache>/onnx/<model>-<hash>/`:

    model.fp32.onnx   the traced model: input_ids, attention_mask -> unit sentence vectors
                      (`embedding`) and the last layer's word-piece states (`tokens`)
    model.int8.onnx   the same with int8 weights (absent when it fails its check)
    export.json       sha256 of the source weights and of each file, the checks' cosines

Why the cache and not the repository: the export depends only on the model, not on the book, so
one export serves every repository on the machine (90 MB per repository would be waste), and a
repository stays readable by the torch path on a machine without ONNX Runtime.

Why the cache can be trusted: each file's sha256 is recorded and checked against the file's
size and mtime on every load (a stat, not a read); whenever either differs the file is hashed
again, and a file whose hash no longer matches (truncated, corrupted, or source weights that
changed) is exported again. Concurrent processes serialise on a lock file; files are written
under temporary names and renamed into place, `export.json` last.

A leaf beside the backends: the encoder factory (index.encoder) calls `ensure_export` and opens
the onnx or openvino backend on the file it returns; the checks here run the file themselves.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..resources import cache_lock, sha256_of
from .exported import ExportedEncoder, cpu_session

RECIPE = 2  # 2: the word-piece states as a second output (pooled windows). Bump when the export or quantisation recipe changes: old exports are redone
FP32, INT8 = "model.fp32.onnx", "model.int8.onnx"
METADATA = "export.json"
MIN_FP32_COSINE = 0.9999  # the traced model must reproduce sentence-transformers
# The int8 file is kept only when it stays this close to fp32 on the probe texts. A necessary
# check, not a sufficient one: on whole books the worst passage can be lower (0.987 on Moby Dick),
# which is why int8 is opt-in (embed.precision = int8).
MIN_INT8_COSINE = 0.99

# Public-domain prose of several lengths (Dickens, Melville, Austen, Doyle) and two questions:
# the texts every export is checked on. The benchmark measures the same on whole books.
PROBE_TEXTS = [
    "Marley was dead: to begin with. There is no doubt whatever about that. The register of his "
    "burial was signed by the clergyman, the clerk, the undertaker, and the chief mourner. Scrooge "
    "signed it: and Scrooge's name was good upon 'Change, for anything he chose to put his hand to.",
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my "
    "purse, and nothing particular to interest me on shore, I thought I would sail about a little and "
    "see the watery part of the world. It is a way I have of driving off the spleen and regulating the "
    "circulation. Whenever I find myself growing grim about the mouth; whenever it is a damp, drizzly "
    "November in my soul; whenever I find myself involuntarily pausing before coffin warehouses, and "
    "bringing up the rear of every funeral I meet, then, I account it high time to get to sea as soon "
    "as I can.",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must "
    "be in want of a wife.",
    "To Sherlock Holmes she is always the woman. I have seldom heard him mention her under any other "
    "name. In his eyes she eclipses and predominates the whole of her sex.",
    "Which ship did the harbour master thank the keeper for saving?",
    "Who tells the narrator to go to sea, and why?",
]


@functools.lru_cache(maxsize=4)
def ensure_export(model_dir: str) -> dict:
    """The verified export of the model at `model_dir` (exported first if missing or corrupt):
    its metadata, with absolute `paths` of the usable files by precision."""
    directory = export_dir(Path(model_dir))
    meta = _verified(directory, Path(model_dir))
    if meta is None:
        with cache_lock(directory):
            meta = _verified(directory, Path(model_dir)) or _export(Path(model_dir), directory)
    meta["paths"] = {p: str(directory / f) for p, f in (("fp32", FP32), ("int8", INT8)) if f in meta["files"]}
    return meta


def export_dir(model_dir: Path) -> Path:
    from ..offline import cache_root

    name = re.sub(r"[^A-Za-z0-9]+", "-", model_dir.parent.name if model_dir.name == "model" else model_dir.name)
    key = hashlib.sha256(f"{model_dir.resolve()}|{RECIPE}".encode()).hexdigest()[:12]
    return cache_root() / "onnx" / f"{name.strip('-')[-40:]}-{key}"


def supports(model_dir: Path) -> bool:
    """True for a sentence-transformers directory this export reproduces: Transformer + mean
    pooling (+ Normalize), with safetensors weights and a tokenizer.json."""
    try:
        modules = [m["type"].rsplit(".", 1)[-1] for m in json.loads((model_dir / "modules.json").read_text())]
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return (
        modules in (["Transformer", "Pooling", "Normalize"], ["Transformer", "Pooling"])
        and pooling.get("pooling_mode_mean_tokens") is True
        and not any(pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                              "pooling_mode_mean_sqrt_len_tokens"))
        and (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file()
    )



def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _verified(directory: Path, model_dir: Path) -> dict | None:
    """The export's metadata when every recorded file (and the source) still has its sha256."""
    try:
        meta = json.loads((directory / METADATA).read_text())
        if meta.get("recipe") != RECIPE or FP32 not in meta.get("files", {}):
            return None
        records = {**meta["files"], "source": meta["source"]}
        paths = {name: directory / name for name in meta["files"]} | {"source": model_dir / "model.safetensors"}
        changed = False
        for name, record in records.items():
            if _stamp(paths[name]) == record["stamp"]:
                continue
            if sha256_of(paths[name]) != record["sha256"]:
                return None  # truncated, corrupted, or new source weights: export again
            record["stamp"], changed = _stamp(paths[name]), True  # same bytes, touched or copied
        if changed:
            _write_json(directory / METADATA, meta)
        return meta
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _export(model_dir: Path, directory: Path) -> dict:
    """Trace, check, quantise, check; write the files and their checksums."""
    if not supports(model_dir):
        raise ConfigError(f"the ONNX export supports BERT-style mean-pooled sentence-transformers models; "
                          f"'{model_dir}' is not one (use embed.backend = torch)")
    sys.stderr.write(f"note: exporting the embedding model to ONNX once ({directory})\n")
    (directory / METADATA).unlink(missing_ok=True)
    tmp_fp32, tmp_int8 = directory / f"{FP32}.tmp", directory / f"{INT8}.tmp"
    reference, reference_tokens = _trace(model_dir, tmp_fp32)
    fp32 = _Check(model_dir, str(tmp_fp32))
    fp32_vecs = fp32.encode(PROBE_TEXTS)
    fp32_cos = min(_cosines(fp32_vecs, reference).min(), _token_cosines(fp32, reference_tokens).min())
    if fp32_cos < MIN_FP32_COSINE:
        raise ConfigError(f"the ONNX export of '{model_dir}' does not reproduce the model "
                          f"(cosine {fp32_cos:.5f}); use embed.backend = torch")
    quantise_int8(tmp_fp32, tmp_int8)
    int8_cos = _cosines(_Check(model_dir, str(tmp_int8)).encode(PROBE_TEXTS), fp32_vecs)
    keep_int8 = bool(int8_cos.min() >= MIN_INT8_COSINE)
    sys.stderr.write(f"note: ONNX fp32 vs sentence-transformers cosine min {fp32_cos:.5f}; int8 vs fp32 cosine "
                     f"min {int8_cos.min():.4f} ({'kept' if keep_int8 else 'below ' + str(MIN_INT8_COSINE) + ', int8 not used'})\n")
    files = {FP32: tmp_fp32}
    if keep_int8:
        files[INT8] = tmp_int8
    else:
        tmp_int8.unlink(missing_ok=True)
    for name, tmp in files.items():
        tmp.replace(directory / name)
    meta = {
        "recipe": RECIPE, "model_dir": str(model_dir.resolve()),
        "source": _record(model_dir / "model.safetensors"),
        "files": {name: _record(directory / name) for name in files},
        "checks": {"fp32_vs_torch_cosine_min": round(float(fp32_cos), 6),
                   "int8_vs_fp32_cosine_min": round(float(int8_cos.min()), 6), "int8_kept": keep_int8,
                   "probe_texts": len(PROBE_TEXTS)},
        "versions": _versions(),
    }
    _write_json(directory / METADATA, meta)
    return meta


class _Check(ExportedEncoder):
    """An exported file run with ONNX Runtime, as the checks read it: the backends that serve the
    file (onnx_encoder, openvino_encoder) are leaves beside this module, which imports neither."""

    backend = "onnx"

    def _open(self, onnx_path: str, threads: int) -> None:
        self.session = cpu_session(onnx_path, threads)
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def _infer(self, outputs: list[str], ids: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
        return self.session.run(outputs, {"input_ids": ids, "attention_mask": mask})


def _record(path: Path) -> dict:
    return {"sha256": sha256_of(path), "stamp": _stamp(path)}


def _trace(model_dir: Path, target: Path) -> tuple[np.ndarray, list[np.ndarray]]:
    """Write the traced fp32 model to `target`; return sentence-transformers' vectors of the
    probe texts and their word pieces' states (the reference the export must reproduce)."""
    import warnings

    from ..offline import forbid_hub_downloads

    forbid_hub_downloads()
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    class MeanPooled(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1), hidden

    # eager attention traces to plain MatMul/Softmax; the SDPA path traces shape checks as constants
    model = MeanPooled(AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")).eval()
    ids = torch.ones((2, 8), dtype=torch.long)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (ids, torch.ones_like(ids)), str(target), dynamo=False, opset_version=17,
            input_names=["input_ids", "attention_mask"], output_names=["embedding", "tokens"],
            dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"},
                          "embedding": {0: "batch"}, "tokens": {0: "batch", 1: "tokens"}},
        )
        st = SentenceTransformer(str(model_dir), device="cpu")
        reference = st.encode(PROBE_TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        tokens = st.encode(PROBE_TEXTS, output_value="token_embeddings", show_progress_bar=False)
    return np.asarray(reference, dtype=np.float32), [t.float().numpy() for t in tokens]


def quantise_int8(source: Path, target: Path, embeddings: bool = False, every_matmul: bool = False) -> None:
    """Dynamic int8 quantisation of the weight MatMuls, per output channel, except the FFN
    down-projections (weights taller than wide): their input is the GELU output, whose outlier
    channels defeat per-tensor activation quantisation. Measured on Novel-47558: quantising
    them too drops the cosine to fp32 from min 0.994 to 0.981 and top-10 retrieval overlap from
    0.95 to 0.92, for 20% less CPU. `embeddings`: the embedding tables (Gather) too, which makes a
    MiniLM file a quarter of its size (the reader ships in the package; the embedder does not).
    `every_matmul`: the down-projections too (1.5x faster again; the reader checks what that costs
    it against fp32 on held-out pairs, pagerag.train.reader.export)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(source), load_external_data=False).graph
    shapes = {init.name: list(init.dims) for init in graph.initializer}
    down = [] if every_matmul else [
        n.name for n in graph.node if n.op_type == "MatMul" and len(shapes.get(n.input[1], [])) == 2
        and shapes[n.input[1]][0] > shapes[n.input[1]][1]]
    import logging

    root = logging.getLogger()
    quiet, handlers = root.level, list(root.handlers)
    root.setLevel(logging.ERROR)  # its "consider pre-processing" advice goes to the root logger
    try:
        quantize_dynamic(str(source), str(target), op_types_to_quantize=["MatMul"] + (["Gather"] if embeddings else []),
                         per_channel=True,
                         weight_type=QuantType.QInt8, nodes_to_exclude=down)
    finally:
        root.setLevel(quiet)
        # `logging.warning(...)` adds a stderr handler to a bare root logger (logging.basicConfig),
        # which would print every library's records from then on, DEBUG ones included
        for handler in set(root.handlers) - set(handlers):
            root.removeHandler(handler)


def _token_cosines(encoder, reference: list[np.ndarray]) -> np.ndarray:
    """Cosines of the export's word-piece states to sentence-transformers', every piece of every probe text."""
    mine: dict[int, np.ndarray] = {}
    for idx, _, states in encoder.token_batches(PROBE_TEXTS):
        mine.update({i: t.states for i, t in zip(idx.tolist(), states)})
    out = []
    for i, ref in enumerate(reference):
        a, b = mine[i].astype(np.float64), ref.astype(np.float64)
        if a.shape != b.shape:
            return np.zeros(1)
        out.append(np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)))
    return np.concatenate(out)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a.astype(np.float64) * b.astype(np.float64), axis=1)


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(value, indent=2))
    tmp.replace(path)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("torch", "onnx", "onnxruntime", "transformers"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "not installed"
    return out
