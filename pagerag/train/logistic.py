"""The logistic fits of the need classifier and the retrieval ranker, with scikit-learn: inputs
z-scored (a near-constant input left unscaled, as the packaged models were fitted), then a
LogisticRegression; held-out scores by leaving one training book out (LeaveOneGroupOut).
"""
from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import LeaveOneGroupOut, cross_val_predict
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

MIN_SCALE = 1e-4  # an input whose standard deviation is below this is left unscaled


class Standardise(StandardScaler):
    """StandardScaler that leaves an input with std < MIN_SCALE unscaled (scale 1)."""

    def fit(self, X, y=None, sample_weight=None):
        super().fit(X, y, sample_weight)
        self.scale_ = np.where(np.sqrt(self.var_) < MIN_SCALE, 1.0, self.scale_)
        return self


def logistic(c: float, **kwargs) -> Pipeline:
    """Standardise -> LogisticRegression(C=c, **kwargs)."""
    return make_pipeline(Standardise(), LogisticRegression(C=c, **kwargs))


def fitted_parts(pipe: Pipeline) -> tuple[np.ndarray, np.ndarray, LogisticRegression]:
    """(mean, scale, regression) of a fitted `logistic` pipeline."""
    scaler, model = pipe[0], pipe[-1]
    return scaler.mean_.copy(), scaler.scale_.copy(), model


def leave_one_book_out(pipe: Pipeline, x: np.ndarray, y: np.ndarray, books: np.ndarray,
                       method: str = "predict") -> np.ndarray:
    """Out-of-fold `method` outputs: each book's rows from the pipeline fitted on the other books."""
    return cross_val_predict(pipe, x, y, groups=books, cv=LeaveOneGroupOut(), method=method)
