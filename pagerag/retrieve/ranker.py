"""The ranker: one pointwise logistic model orders the whole candidate pool.

A candidate's score is the log-odds that its passage holds gold evidence, from its features
(pool.py). Two models ship in `ranker.json`, both fitted on the 15 training books
(`python -m pagerag.train.ranker`, leave-books-out cross-validation): `graph` over every
feature, used when the plan runs a graph operator, and `text` over the text floor's features
only, used by passages-only pipelines, so the no-graph baseline gets the best ranker its own
signals allow. The budget is then filled in ranker order (evidence.py): a graph candidate enters
only by outranking the floor's marginal passage, never by a reserved share.

`retrieve.ranker = operator` orders by the operators' own scores instead (the first operator
that proposed a candidate decides; used to measure one operator alone, e.g. the `ppr` preset).
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .pool import FEATURES, PoolItem, TEXT_FEATURES

MODEL_FILE = Path(__file__).with_name("ranker.json")


@dataclass
class RankerModel:
    name: str
    features: tuple[str, ...]
    weights: np.ndarray
    bias: float
    mean: np.ndarray
    scale: np.ndarray

    def score(self, x: np.ndarray) -> np.ndarray:
        """Log-odds per row of `x` (columns in self.features order)."""
        if x.shape[0] == 0:
            return np.zeros(0)
        return ((x - self.mean) / self.scale) @ self.weights + self.bias

    def to_json(self) -> dict:
        return {"features": list(self.features), "weights": np.round(self.weights, 6).tolist(), "bias": round(self.bias, 6),
                "mean": np.round(self.mean, 6).tolist(), "scale": np.round(self.scale, 6).tolist()}

    @classmethod
    def from_json(cls, name: str, data: dict) -> "RankerModel":
        features = tuple(data["features"])
        unknown = [f for f in features if f not in FEATURES]
        if unknown:
            raise ValueError(f"unknown feature(s) {unknown}")
        return cls(name, features, np.asarray(data["weights"], np.float64), float(data["bias"]),
                   np.asarray(data["mean"], np.float64), np.asarray(data["scale"], np.float64))


@functools.lru_cache(maxsize=4)
def load_rankers(path: str = str(MODEL_FILE)) -> dict[str, RankerModel]:
    from ..errors import ConfigError

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return {name: RankerModel.from_json(name, data["models"][name]) for name in ("graph", "text")}
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(f"{path}: the ranker model is unreadable ({exc}); reinstall pagerag") from None


def ranker_for(uses_graph: bool, path: str = "") -> RankerModel:
    return load_rankers(path or str(MODEL_FILE))["graph" if uses_graph else "text"]


def order(items: list[PoolItem], scores: np.ndarray) -> list[PoolItem]:
    """Items by score, best first; ties go to the text floor's better rank, then the row."""
    for it, s in zip(items, scores):
        it.final = float(s)
    text_rank = lambda it: it.operators["text"]["rank"] if "text" in it.operators else 10**6  # noqa: E731
    return sorted(items, key=lambda it: (-it.final, text_rank(it), it.row))


def operator_order(items: list[PoolItem], operators: list[str]) -> list[PoolItem]:
    """Order by the operators' own scores (`retrieve.ranker = operator`): the first operator in
    `operators` that proposed an item gives its score; items of earlier operators come first."""
    def key(it: PoolItem):
        for i, op in enumerate(operators):
            if op in it.operators:
                return (i, -it.operators[op]["score"], it.row)
        return (len(operators), 0.0, it.row)

    ranked = sorted(items, key=key)
    for i, it in enumerate(ranked):
        it.final = -float(i)
    return ranked


__all__ = ["FEATURES", "TEXT_FEATURES", "RankerModel", "load_rankers", "ranker_for", "order", "operator_order"]
