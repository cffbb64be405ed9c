"""Selective-prediction metrics for a confidence score s and success labels y in {0, 1}.

Accuracy-coverage: answering the m queries with the highest s gives coverage m/n and accuracy
(successes among them)/m. Tied scores are ordered at random, so every metric here uses the
*expected value* over tie orders: within a tie group of size g with p successes, the first j
taken contain j*p/g successes on average. A constant score therefore has AUC-AC = mean(y).
"""
from __future__ import annotations

from typing import Callable

import numpy as np


def _as_arrays(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels, dtype=np.float64).ravel()
    if s.shape != y.shape:
        raise ValueError(f"scores and labels differ in length ({s.size} vs {y.size})")
    if s.size == 0:
        raise ValueError("no queries to score")
    return s, y


def expected_successes_at(scores, labels) -> np.ndarray:
    """E[successes among the top m] for m = 1..n, ties broken uniformly at random."""
    s, y = _as_arrays(scores, labels)
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    # Tie groups in the sorted list: start index of each position's group.
    new_group = np.r_[True, s_sorted[1:] != s_sorted[:-1]]
    group_id = np.cumsum(new_group) - 1
    starts = np.flatnonzero(new_group)
    sizes = np.diff(np.r_[starts, s.size])
    group_pos = np.add.reduceat(y_sorted, starts)
    before = np.r_[0.0, np.cumsum(group_pos)[:-1]]
    taken_in_group = np.arange(1, s.size + 1) - starts[group_id]
    return before[group_id] + taken_in_group * (group_pos / sizes)[group_id]


def accuracy_coverage_curve(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    """(coverage m/n, expected accuracy of the top m) for m = 1..n."""
    succ = expected_successes_at(scores, labels)
    m = np.arange(1, succ.size + 1, dtype=np.float64)
    return m / succ.size, succ / m


def auc_ac(scores, labels) -> float:
    """Area under the accuracy-coverage curve: the mean accuracy over coverages 1/n, 2/n, ..., 1."""
    _, acc = accuracy_coverage_curve(scores, labels)
    return float(acc.mean())


def oracle_auc_ac(labels) -> float:
    y = np.asarray(labels, dtype=np.float64)
    return auc_ac(y, y)


def _count_at(coverage: float, n: int) -> int:
    return int(min(n, max(1, round(coverage * n))))


def accuracy_at_coverage(scores, labels, coverage: float) -> float:
    """Expected accuracy of the round(coverage*n) most confident queries."""
    succ = expected_successes_at(scores, labels)
    m = _count_at(coverage, succ.size)
    return float(succ[m - 1] / m)


def cwar_at_coverage(scores, labels, coverage: float) -> float:
    """Confident-wrong-answer rate among the answered queries at that coverage."""
    return 1.0 - accuracy_at_coverage(scores, labels, coverage)


def cwar_at_threshold(scores, labels, tau: float) -> tuple[float, float]:
    """(CWAR, coverage) of the confident set {s >= tau}; CWAR of an empty set is 0."""
    s, y = _as_arrays(scores, labels)
    confident = s >= tau
    if not confident.any():
        return 0.0, 0.0
    return float(1.0 - y[confident].mean()), float(confident.mean())


def select_threshold(scores, labels, target_cwar: float) -> float:
    """tau* = min{tau : CWAR(tau) <= target} over the calibration scores (paper section 5.3).

    Candidates are the distinct scores; if none meets the target the threshold is just above
    the largest score (the confident set is empty: abstain on everything seen).
    """
    s, y = _as_arrays(scores, labels)
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    # CWAR of {s >= v} for each distinct v: include the whole tie group of v.
    last_of_group = np.r_[s_sorted[1:] != s_sorted[:-1], True]
    taken = np.flatnonzero(last_of_group) + 1
    cwar = 1.0 - np.cumsum(y_sorted)[taken - 1] / taken
    ok = np.flatnonzero(cwar <= target_cwar + 1e-12)
    if ok.size == 0:
        return float(np.nextafter(s_sorted[0], np.inf))
    return float(s_sorted[taken[ok[-1]] - 1])


def ece(probs, labels, n_bins: int = 10) -> float:
    """Expected calibration error with equal-frequency bins (sorted by probability)."""
    p, y = _as_arrays(probs, labels)
    order = np.argsort(p, kind="stable")
    total = 0.0
    for idx in np.array_split(order, min(n_bins, p.size)):
        total += idx.size * abs(y[idx].mean() - p[idx].mean())
    return float(total / p.size)


def brier(probs, labels) -> float:
    p, y = _as_arrays(probs, labels)
    return float(np.mean((p - y) ** 2))


def constant_brier(labels, rate: float | None = None) -> float:
    """Brier of always predicting one rate (default: the labels' own base rate)."""
    y = np.asarray(labels, dtype=np.float64)
    r = y.mean() if rate is None else rate
    return float(np.mean((r - y) ** 2))


def bootstrap_indices(n: int, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    """(n_boot, n) resampled query indices; share them between methods for paired tests."""
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def bootstrap_ci(metric: Callable[[np.ndarray, np.ndarray], float], scores, labels,
                 idx: np.ndarray | None = None, alpha: float = 0.05) -> tuple[float, float]:
    """Percentile bootstrap CI of metric(scores, labels) over resampled queries."""
    s, y = _as_arrays(scores, labels)
    idx = bootstrap_indices(s.size) if idx is None else idx
    vals = np.array([metric(s[i], y[i]) for i in idx])
    return float(np.quantile(vals, alpha / 2)), float(np.quantile(vals, 1 - alpha / 2))


def paired_bootstrap_diff(metric: Callable[[np.ndarray, np.ndarray], float], scores_a, scores_b, labels,
                          idx: np.ndarray | None = None, alpha: float = 0.05) -> dict[str, float]:
    """metric(a) - metric(b) with a paired percentile CI (same resamples for both methods)."""
    a, y = _as_arrays(scores_a, labels)
    b, _ = _as_arrays(scores_b, labels)
    idx = bootstrap_indices(a.size) if idx is None else idx
    diffs = np.array([metric(a[i], y[i]) - metric(b[i], y[i]) for i in idx])
    return {
        "diff": float(metric(a, y) - metric(b, y)),
        "ci": [float(np.quantile(diffs, alpha / 2)), float(np.quantile(diffs, 1 - alpha / 2))],
        "p_le_0": float(np.mean(diffs <= 0)),
    }


def normalised_gain(auc: float, random_auc: float, oracle_auc: float) -> float:
    """(AUC - random) / (oracle - random): the share of the achievable gain that was realised."""
    span = oracle_auc - random_auc
    return float((auc - random_auc) / span) if span > 0 else 0.0
