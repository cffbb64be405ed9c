"""Shared by the test_ask_* modules: RCS model files with a chosen threshold (real RCSModel
JSON files, read by the real gate) and loopback-LLM settings."""
from __future__ import annotations

from pathlib import Path

from pagerag.confidence.features import PAPER_FEATURES
from pagerag.confidence.model import RCSModel


def rcs_model_file(folder: Path, name: str, bias: float, tau: float = 0.5,
                   weights: dict[str, float] | None = None, mean: dict[str, float] | None = None) -> Path:
    """A logistic RCS model over the paper's features (+ any weighted extra), saved as JSON."""
    names = list(PAPER_FEATURES) + [n for n in (weights or {}) if n not in PAPER_FEATURES]
    w = [float((weights or {}).get(n, 0.0)) for n in names]
    m = [float((mean or {}).get(n, 0.0)) for n in names]
    return RCSModel(names, m, [1.0] * len(names), w, bias, tau=tau).save(folder / f"{name}.json")


def permissive_gate(folder: Path) -> dict:
    """confidence settings whose gate always passes (score ~1 > tau), for tests about later steps."""
    return {"model_path": str(rcs_model_file(folder, "permissive", bias=8.0))}


def loopback_llm(server, **extra) -> dict:
    return {"backend": "openai", "base_url": server.base_url, "model": "loopback-model", "timeout_s": 10.0,
            "max_retries": 0, "cache": False, **extra}
