"""A numpy encoder for questions: the same BERT sentence embedder without importing torch.

A cold `pagerag retrieve` spends most of its time importing torch and sentence-transformers
(several seconds) to embed one short question. For the models this project ships — a BERT
encoder with mean pooling and L2 normalisation, like all-MiniLM-L6-v2 — the forward pass is a
few matrix products, so it is done here in numpy from the model's own safetensors weights and
tokenizer.json. The integration tests check it against sentence-transformers (cosine > 0.9999).
Any other model (or `retrieve.query_encoder = "torch"`) uses the sentence-transformers embedder.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np

SUPPORTED_MODULES = ["sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
                     "sentence_transformers.models.Normalize"]


def supports(model_dir: Path) -> bool:
    """True for a BERT + mean pooling + normalise sentence-transformers directory with safetensors."""
    try:
        modules = [m["type"] for m in json.loads((model_dir / "modules.json").read_text())]
        config = json.loads((model_dir / "config.json").read_text())
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return (
        modules == SUPPORTED_MODULES and config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu" and config.get("position_embedding_type", "absolute") == "absolute"
        and pooling.get("pooling_mode_mean_tokens") is True
        and not any(pooling.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                                              "pooling_mode_mean_sqrt_len_tokens"))
        and (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file()
    )


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, below float32 resolution at these scales)."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class NumpyBertEncoder:
    """encode(texts) -> float32 unit vectors, as SentenceTransformer(model).encode(normalize=True)."""

    def __init__(self, model_dir: Path, max_seq_length: int = 256):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text())
        st_config = model_dir / "sentence_bert_config.json"
        if st_config.is_file():
            max_seq_length = int(json.loads(st_config.read_text()).get("max_seq_length", max_seq_length))
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        raw = {k.removeprefix("bert."): v for k, v in load_file(str(model_dir / "model.safetensors")).items()}
        # Linear weights pre-transposed and contiguous once: x @ W is then one BLAS call.
        self.w = {k: (np.ascontiguousarray(v.T) if k.endswith(".weight") and v.ndim == 2 and "embeddings" not in k else v)
                  for k, v in raw.items()}
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_seq_length)
        self.tokenizer.no_padding()
        self.dim = int(config["hidden_size"])

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        order = np.argsort([len(e.ids) for e in encodings])  # similar lengths together: little padding
        out = np.zeros((len(texts), self.dim), np.float32)
        for lo in range(0, len(order), batch_size):
            idx = order[lo : lo + batch_size]
            out[idx] = self._forward([encodings[i].ids for i in idx])
        return out

    def _forward(self, batch_ids: list[list[int]]) -> np.ndarray:
        w, n = self.w, max(len(ids) for ids in batch_ids)
        ids = np.zeros((len(batch_ids), n), np.int64)
        mask = np.zeros((len(batch_ids), n), np.float32)
        for row, seq in enumerate(batch_ids):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        bias = (1.0 - mask)[:, None, None, :] * np.finfo(np.float32).min
        for layer in range(self.layers):
            x = self._layer(x, bias, f"encoder.layer.{layer}.")
        summed = (x * mask[..., None]).sum(1)
        pooled = summed / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        return (pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)).astype(np.float32)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        flat = x.reshape(-1, x.shape[-1]) @ self.w[name + ".weight"] + self.w[name + ".bias"]
        return flat.reshape(*x.shape[:-1], flat.shape[-1])

    def _layer(self, x: np.ndarray, bias: np.ndarray, p: str) -> np.ndarray:
        b, n, d = x.shape
        h = self.heads

        def split(t: np.ndarray) -> np.ndarray:
            return t.reshape(b, n, h, d // h).transpose(0, 2, 1, 3)

        q = split(self._linear(x, p + "attention.self.query"))
        k = split(self._linear(x, p + "attention.self.key"))
        v = split(self._linear(x, p + "attention.self.value"))
        scores = q @ k.transpose(0, 1, 3, 2) * float(1.0 / (d // h) ** 0.5) + bias
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
        attn = _layer_norm(self._linear(context, p + "attention.output.dense") + x,
                           self.w[p + "attention.output.LayerNorm.weight"], self.w[p + "attention.output.LayerNorm.bias"], self.eps)
        inter = self._linear(attn, p + "intermediate.dense")
        inter = 0.5 * inter * (1.0 + _erf(inter * float(0.5**0.5)))
        return _layer_norm(self._linear(inter, p + "output.dense") + attn,
                           self.w[p + "output.LayerNorm.weight"], self.w[p + "output.LayerNorm.bias"], self.eps)


@functools.lru_cache(maxsize=2)
def get_numpy_encoder(model: str) -> NumpyBertEncoder | None:
    """The numpy encoder for `model` when it is supported, else None."""
    from ..index.embed import resolve_model_path

    path = resolve_model_path(model)
    return NumpyBertEncoder(path) if supports(path) else None
