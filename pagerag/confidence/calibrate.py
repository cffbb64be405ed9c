"""Fit an RCS model on labelled questions and pick tau for a target CWAR (paper section 5.3).

Labels: 1 when every gold passage/quote is inside the final evidence, else 0.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import PageRAGError
from .metrics import auc_ac, brier, cwar_at_threshold, ece, select_threshold
from .model import DEFAULT_PRIOR, RCSModel, l2_for


def feature_matrix(rows: Sequence[Mapping[str, float]], names: Sequence[str]) -> np.ndarray:
    try:
        return np.array([[float(row[n]) for n in names] for row in rows], dtype=np.float64)
    except KeyError as exc:
        raise PageRAGError(f"calibration row lacks feature {exc.args[0]!r}") from None


def fit_from_labelled(features_rows: Sequence[Mapping[str, float]], labels: Sequence[float],
                      target_cwar: float = 0.2, feature_names: Sequence[str] | None = None,
                      l2: float | None = None, prior: float = DEFAULT_PRIOR, description: Mapping[str, Any] | None = None) -> RCSModel:
    """RCSModel fitted on (feature dict, label) pairs, with tau* = min{tau : CWAR(tau) <= target}.

    L2 defaults to a prior of fixed strength (prior / n; settings.confidence.l2_prior): small sets
    are shrunk more.
    `feature_names` defaults to the keys of the first row (in order). The model's `metrics`
    records what it achieves on these same calibration questions.
    """
    if len(features_rows) != len(labels):
        raise PageRAGError(f"{len(features_rows)} feature rows but {len(labels)} labels")
    if len(features_rows) < 10:
        raise PageRAGError(f"need at least 10 labelled questions to calibrate, got {len(features_rows)}")
    if not 0.0 < target_cwar < 1.0:
        raise PageRAGError(f"target CWAR must be between 0 and 1, got {target_cwar}")
    names = list(feature_names or features_rows[0].keys())
    X = feature_matrix(features_rows, names)
    y = np.asarray(labels, dtype=np.float64)
    l2 = l2_for(y.size, prior) if l2 is None else l2
    model = RCSModel.fit(X, y, names, l2=l2, target_cwar=target_cwar)
    scores = model.score_matrix(X)
    model.tau = select_threshold(scores, y, target_cwar)
    cwar, coverage = cwar_at_threshold(scores, y, model.tau)
    model.training = {"n": int(y.size), "success_rate": float(y.mean()), "l2": l2, **dict(description or {})}
    model.metrics = {
        "calibration_auc_ac": auc_ac(scores, y), "calibration_ece": ece(scores, y),
        "calibration_brier": brier(scores, y), "calibration_cwar": cwar, "calibration_coverage": coverage,
    }
    return model
