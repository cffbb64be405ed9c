"""The RCS model: logistic regression on z-scored features, stored as a small JSON file. The
same class holds the other fitted decisions of the question path (the sufficiency models and the
sentence ranker of pagerag.generate): one logistic model, one file format.

Fitting minimises the mean binary cross-entropy plus a small L2 penalty on the weights (not on
the bias): scikit-learn's LogisticRegression (lbfgs, tolerance 1e-8). Scoring one query is a dot
product in numpy: no sklearn on the hot path.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import PageRAGError

FORMAT = "pagerag-rcs/1"
# L2 is a prior of fixed total strength: the per-query penalty is PRIOR / n, so a small
# calibration set is regularised more than a large one (a Gaussian prior on the weights).
# Cross-validated gains on the multi-hop tune halves are flat between 1 and 10 (within 0.005);
# 3 is the more conservative of the two best, which matters for users' small calibration sets.
DEFAULT_PRIOR = 3.0


def l2_for(n: int, prior: float) -> float:
    return prior / max(n, 1)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free logistic


def fit_logistic(Z: np.ndarray, y: np.ndarray, l2: float = 1e-2, sample_weight: np.ndarray | None = None
                 ) -> tuple[np.ndarray, float]:
    """(weights, bias) minimising mean BCE + l2/2 * |w|^2 (bias unpenalised): scikit-learn's
    LogisticRegression with C = 1 / (l2 * n), the same objective scaled by n."""
    from sklearn.linear_model import LogisticRegression

    n = Z.shape[0]
    weight = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64) * n / np.sum(sample_weight)
    if l2 <= 0:
        model = LogisticRegression(C=np.inf, tol=1e-8, max_iter=1000)
    else:
        model = LogisticRegression(C=1.0 / (l2 * n), tol=1e-8, max_iter=1000)
    model.fit(Z, y.astype(np.int64), sample_weight=weight)
    return model.coef_[0].astype(np.float64), float(model.intercept_[0])


CURVE_POINTS = 400


def curve_of(scores: np.ndarray, labels: np.ndarray, points: int = CURVE_POINTS) -> list[list[float]]:
    """[threshold, CWAR, coverage] at up to `points` thresholds (score quantiles) of held-out scores,
    best first: what RCSModel.tau_for reads a threshold off."""
    scores, labels = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    picks = np.unique(np.linspace(0, s.size - 1, min(points, s.size)).round().astype(int))
    out = []
    for i in picks:
        # the confident set {score >= s[i]} includes the whole tie group of s[i]
        j = int(np.flatnonzero(s >= s[i])[-1])
        out.append([round(float(s[i]), 6), round(float(1 - y[: j + 1].mean()), 6), round((j + 1) / s.size, 6)])
    return out


@dataclass
class RCSModel:
    feature_names: list[str]
    mean: np.ndarray
    std: np.ndarray
    weights: np.ndarray
    bias: float
    tau: float = 0.5
    target_cwar: float = 0.2
    training: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    # [threshold, CWAR, coverage] points of held-out scores (cross-validated on the data the model
    # was fitted on), so a threshold for any target CWAR can be read off without refitting
    curve: list[list[float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.mean = np.asarray(self.mean, dtype=np.float64)
        self.std = np.asarray(self.std, dtype=np.float64)
        self.weights = np.asarray(self.weights, dtype=np.float64)
        if not (len(self.feature_names) == self.mean.size == self.std.size == self.weights.size):
            raise PageRAGError("RCS model: feature names, normalisation and weights differ in length")
        # z-scoring folded into the weights once, so scoring is one dot product.
        self._coef = self.weights / self.std
        self._offset = float(self.bias - np.dot(self._coef, self.mean))

    # -- fitting ---------------------------------------------------------------------------
    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray, feature_names: Sequence[str], l2: float = 1e-2,
            sample_weight: np.ndarray | None = None, **kwargs: Any) -> "RCSModel":
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] != y.size or X.shape[1] != len(feature_names):
            raise PageRAGError("RCS fit: feature matrix does not match labels / feature names")
        if y.min() == y.max():
            raise PageRAGError("RCS fit: calibration labels are all the same; need successes and failures")
        mean = X.mean(axis=0)
        std = X.std(axis=0)
        std[std < 1e-12] = 1.0  # a constant feature carries no information; keep it inert
        w, b = fit_logistic((X - mean) / std, y, l2=l2, sample_weight=sample_weight)
        return cls(list(feature_names), mean, std, w, b, **kwargs)

    # -- scoring ---------------------------------------------------------------------------
    def vector(self, features: Mapping[str, float]) -> np.ndarray:
        try:
            return np.array([features[name] for name in self.feature_names], dtype=np.float64)
        except KeyError as exc:
            raise PageRAGError(f"RCS model needs feature {exc.args[0]!r}, which was not computed") from None

    def score(self, features: Mapping[str, float]) -> float:
        """P(all needed evidence was retrieved) for one query's feature dict."""
        z = float(np.dot(self._coef, self.vector(features))) + self._offset
        return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))

    def score_matrix(self, X: np.ndarray) -> np.ndarray:
        return _sigmoid(np.asarray(X, dtype=np.float64) @ self._coef + self._offset)

    def tau_for(self, target_cwar: float | None) -> float:
        """The smallest threshold whose held-out CWAR is at most `target_cwar` (the fitted tau when
        the model has no curve or no target is given); above every score when none qualifies."""
        if target_cwar is None or not self.curve:
            return float(self.tau)
        ok = [t for t, cwar, _ in self.curve if cwar <= target_cwar + 1e-12]
        return float(min(ok)) if ok else float(max(t for t, _, _ in self.curve) + 1e-6)

    def confident(self, features: Mapping[str, float]) -> bool:
        """True when the score clears the calibrated threshold tau."""
        return self.score(features) >= self.tau

    # -- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "feature_names": list(self.feature_names),
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
            "weights": self.weights.tolist(),
            "bias": self.bias,
            "tau": self.tau,
            "target_cwar": self.target_cwar,
            "training": self.training,
            "metrics": self.metrics,
            "curve": self.curve,
        }

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        tmp.replace(path)
        return path

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RCSModel":
        if data.get("format") != FORMAT:
            raise PageRAGError(f"not an RCS model file (format {data.get('format')!r}, expected {FORMAT!r})")
        try:
            return cls(list(data["feature_names"]), data["mean"], data["std"], data["weights"],
                       float(data["bias"]), float(data["tau"]), float(data["target_cwar"]),
                       dict(data.get("training", {})), dict(data.get("metrics", {})),
                       [list(map(float, point)) for point in data.get("curve", [])])
        except (KeyError, TypeError, ValueError) as exc:
            raise PageRAGError(f"RCS model file is incomplete: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> "RCSModel":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise PageRAGError(f"{path}: cannot read RCS model: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise PageRAGError(f"{path}: RCS model is not valid JSON: {exc.msg}") from None
        return cls.from_dict(data)


DEFAULT_MODEL_PATH = Path(__file__).with_name("default_rcs.json")
# Fitted on the training books' own retrieval (pagerag.train.fit): the gate's model for books.
BOOK_MODEL_PATH = Path(__file__).with_name("book_rcs.json")
# phi1-phi9 only: for a pipeline that has hop-1/hop-2 score lists but not the evidence extras.
PAPER_MODEL_PATH = Path(__file__).with_name("paper_rcs.json")


def load_default_model() -> RCSModel:
    """The model shipped in the package (trained on the multi-hop sets, packaged embedder)."""
    return RCSModel.load(DEFAULT_MODEL_PATH)
