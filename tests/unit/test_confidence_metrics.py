"""Every RCS metric against a brute-force definition on small hand-made cases."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from pagerag.confidence import metrics as M


def brute_curves(scores, labels):
    """All orders consistent with the scores (ties permuted), each as its accuracy list."""
    n = len(scores)
    curves = []
    for perm in itertools.permutations(range(n)):
        if any(scores[perm[i]] < scores[perm[i + 1]] for i in range(n - 1)):
            continue  # not a descending order of the scores
        curves.append([sum(labels[j] for j in perm[:m]) / m for m in range(1, n + 1)])
    return np.array(curves, dtype=float)


CASES = [
    ([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0]),
    ([0.5, 0.5, 0.5, 0.5], [1, 0, 0, 1]),
    ([0.9, 0.7, 0.7, 0.7, 0.2, 0.2], [0, 1, 0, 1, 1, 0]),
    ([0.1, 0.3, 0.3, 0.9, 0.9], [0, 1, 0, 1, 0]),
]


@pytest.mark.parametrize("scores,labels", CASES)
def test_auc_ac_is_the_expected_area_over_tie_orders(scores, labels):
    curves = brute_curves(scores, labels)
    assert M.auc_ac(scores, labels) == pytest.approx(curves.mean(axis=1).mean(), abs=1e-12)


@pytest.mark.parametrize("scores,labels", CASES)
def test_accuracy_and_cwar_at_coverage_match_brute_force(scores, labels):
    curves = brute_curves(scores, labels)
    n = len(scores)
    for cov in (0.5, 0.7, 1.0):
        m = min(n, max(1, round(cov * n)))
        expected = curves[:, m - 1].mean()
        assert M.accuracy_at_coverage(scores, labels, cov) == pytest.approx(expected, abs=1e-12)
        assert M.cwar_at_coverage(scores, labels, cov) == pytest.approx(1 - expected, abs=1e-12)


def test_constant_score_equals_base_rate_and_oracle_is_perfect_first():
    y = [1, 0, 0, 1, 0]
    assert M.auc_ac([0.3] * 5, y) == pytest.approx(0.4)
    # oracle: accuracies 1, 1, 2/3, 2/4, 2/5
    assert M.oracle_auc_ac(y) == pytest.approx((1 + 1 + 2 / 3 + 0.5 + 0.4) / 5)
    assert M.normalised_gain(M.oracle_auc_ac(y), 0.4, M.oracle_auc_ac(y)) == pytest.approx(1.0)


def test_ece_with_equal_frequency_bins_by_hand():
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9, 0.95, 0.05])
    y = np.array([0, 0, 1, 0, 1, 1, 0, 1, 1, 0])
    # 5 bins of 2 after sorting by p: (0.05,0.1|0,0) (0.2,0.3|0,1) (0.4,0.6|0,1) (0.7,0.8|1,0) (0.9,0.95|1,1)
    by_hand = (2 * abs(0 - 0.075) + 2 * abs(0.5 - 0.25) + 2 * abs(0.5 - 0.5)
               + 2 * abs(0.5 - 0.75) + 2 * abs(1 - 0.925)) / 10
    assert M.ece(p, y, n_bins=5) == pytest.approx(by_hand)
    assert M.ece(y.astype(float), y) == pytest.approx(0.0)


def test_brier_and_constant_brier():
    p, y = [0.8, 0.3, 0.5], [1, 0, 1]
    assert M.brier(p, y) == pytest.approx((0.04 + 0.09 + 0.25) / 3)
    assert M.constant_brier(y) == pytest.approx((2 * (1 / 3) ** 2 + (2 / 3) ** 2) / 3)


def test_threshold_is_the_smallest_tau_meeting_the_target():
    s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    y = np.array([1, 1, 0, 1, 0, 0, 1])
    for gamma in (0.0, 0.2, 0.25, 0.34, 0.5, 1.0):
        # brute force: every candidate tau, keep those whose confident set meets the target
        ok = [t for t in s if M.cwar_at_threshold(s, y, t)[0] <= gamma]
        tau = M.select_threshold(s, y, gamma)
        assert tau == pytest.approx(min(ok))
        assert M.cwar_at_threshold(s, y, tau)[0] <= gamma + 1e-12


def test_threshold_above_all_scores_when_target_unreachable():
    s, y = np.array([0.9, 0.4]), np.array([0, 1])
    tau = M.select_threshold(s, y, 0.1)
    assert tau > 0.9 and M.cwar_at_threshold(s, y, tau) == (0.0, 0.0)


def test_bootstrap_ci_brackets_the_estimate_and_paired_diff_detects_a_better_score():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 300)
    good = y + rng.normal(0, 0.5, 300)
    bad = rng.normal(0, 1, 300)
    idx = M.bootstrap_indices(300, 400, seed=2)
    lo, hi = M.bootstrap_ci(M.auc_ac, good, y, idx)
    assert lo < M.auc_ac(good, y) < hi
    diff = M.paired_bootstrap_diff(M.auc_ac, good, bad, y, idx)
    assert diff["ci"][0] > 0 and diff["diff"] > 0
    same = M.paired_bootstrap_diff(M.auc_ac, good, good, y, idx)
    assert same["ci"] == [0.0, 0.0]
