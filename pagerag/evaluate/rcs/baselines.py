"""The paper's confidence baselines (section 6), each a score where higher = more confident.

Feature tables are column dicts {feature name: float64 array over queries}. Learned baselines
are fitted on the tune table and scored on the test table.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from ...confidence.metrics import auc_ac

Table = Mapping[str, np.ndarray]
TEMPERATURES = (0.5, 1.0, 2.0, 5.0, 10.0)


def random_scores(test: Table) -> np.ndarray:
    """A constant score: every order equally likely, i.e. the exact expectation of a uniform
    random score (AUC-AC = base success rate) without the noise of one random draw."""
    return np.full(len(next(iter(test.values()))), 0.5)


def entropy_scores(test: Table) -> np.ndarray:
    return 1.0 - test["hop1_entropy"]


def max_scores(test: Table) -> np.ndarray:
    return np.asarray(test["hop1_max"], dtype=np.float64)


def margin_scores(test: Table) -> np.ndarray:
    return np.asarray(test["hop1_margin"], dtype=np.float64)


def lift_scores(test: Table) -> np.ndarray:
    return np.asarray(test["hop1_lift"], dtype=np.float64)


def query_len_inverse_scores(test: Table) -> np.ndarray:
    return 1.0 / (1.0 + np.asarray(test["query_len"], dtype=np.float64) / 20.0)


def softmax_top1(hop1_lists: np.ndarray, temperature: float) -> np.ndarray:
    """Softmax probability of the top hop-1 passage over the top-K scores at temperature T."""
    z = np.asarray(hop1_lists, dtype=np.float64) / temperature
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e.max(axis=1) / e.sum(axis=1)


def temperature_scores(tune_lists: np.ndarray, y_tune: np.ndarray, test_lists: np.ndarray) -> tuple[np.ndarray, float]:
    """Temperature-scaled top-1 softmax; T from the paper's grid, chosen by tune AUC-AC."""
    best_t = max(TEMPERATURES, key=lambda t: auc_ac(softmax_top1(tune_lists, t), y_tune))
    return softmax_top1(test_lists, best_t), best_t


def _matrix(table: Table, names: Sequence[str]) -> np.ndarray:
    return np.column_stack([np.asarray(table[n], dtype=np.float64) for n in names])


def mlp_scores(tune: Table, y_tune: np.ndarray, test: Table, names: Sequence[str], seed: int = 0) -> np.ndarray:
    """MLP(32, 32) on the z-scored features (sklearn; evaluation only, never on the hot path)."""
    from sklearn.neural_network import MLPClassifier

    Xtr, Xte = _matrix(tune, names), _matrix(test, names)
    mean, std = Xtr.mean(axis=0), Xtr.std(axis=0)
    std[std < 1e-12] = 1.0
    clf = MLPClassifier(hidden_layer_sizes=(32, 32), max_iter=2000, random_state=seed)
    clf.fit((Xtr - mean) / std, y_tune.astype(int))
    return clf.predict_proba((Xte - mean) / std)[:, 1]


UNSUPERVISED: dict[str, Callable[[Table], np.ndarray]] = {
    "random": random_scores,
    "entropy": entropy_scores,
    "max-score": max_scores,
    "margin": margin_scores,
    "lift": lift_scores,
    "query-len-inv": query_len_inverse_scores,
}
