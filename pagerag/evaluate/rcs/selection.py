"""Which extra features earn their place: leave-one-out elimination by cross-validation on the
*tune* halves only (the test halves never influence the feature set or the L2 strength).

Criterion: for each data set, out-of-fold RCS scores on its tune half (k-fold, repeated with
different fold assignments), turned into AUC-AC and then into the normalised gain
(AUC - random) / (oracle - random) so that data sets with different base rates weigh the same;
the criterion is the mean gain over the data sets. The paper's phi1-phi9 always stay.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from ...confidence.metrics import auc_ac, normalised_gain, oracle_auc_ac
from ...confidence.model import RCSModel, l2_for

Table = Mapping[str, np.ndarray]
PRIOR_GRID = (1.0, 3.0, 10.0, 30.0)  # the prior strengths benchmarks/rcs.py --select compares


def _folds(y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Stratified fold number of each query."""
    fold = np.empty(y.size, dtype=int)
    for label in (0, 1):
        idx = rng.permutation(np.flatnonzero(y == label))
        fold[idx] = np.arange(idx.size) % k
    return fold


def out_of_fold_gain(X: np.ndarray, y: np.ndarray, prior: float, k: int = 5, repeats: int = 4, seed: int = 0) -> float:
    """Mean normalised AUC-AC gain of out-of-fold logistic scores over `repeats` fold draws."""
    rng = np.random.default_rng(seed)
    random_auc, oracle = float(y.mean()), oracle_auc_ac(y)
    gains = []
    names = [str(i) for i in range(X.shape[1])]
    for _ in range(repeats):
        fold = _folds(y, k, rng)
        scores = np.empty(y.size)
        for f in range(k):
            train = fold != f
            model = RCSModel.fit(X[train], y[train], names, l2=l2_for(int(train.sum()), prior))
            scores[~train] = model.score_matrix(X[~train])
        gains.append(normalised_gain(auc_ac(scores, y), random_auc, oracle))
    return float(np.mean(gains))


def criterion(datasets: Sequence[tuple[Table, np.ndarray]], names: Sequence[str], prior: float, seed: int = 0) -> float:
    return float(np.mean([out_of_fold_gain(np.column_stack([t[n] for n in names]), y, prior, seed=seed)
                          for t, y in datasets]))


def backward_eliminate(datasets: Sequence[tuple[Table, np.ndarray]], fixed: Sequence[str],
                       candidates: Sequence[str], prior: float, tolerance: float = 0.002,
                       log: Callable[[str], None] | None = None) -> tuple[list[str], list[dict]]:
    """Drop, one at a time, the extra feature whose removal helps most (or hurts least, by no
    more than `tolerance`); stop when every remaining extra costs more than that. Returns the
    kept extras and the trace of steps."""
    say = log or (lambda _m: None)
    kept = list(candidates)
    current = criterion(datasets, [*fixed, *kept], prior)
    trace = [{"step": 0, "dropped": None, "criterion": current}]
    say(f"all {len(kept)} extras: criterion {current:.4f}")
    while kept:
        trials = {f: criterion(datasets, [*fixed, *[g for g in kept if g != f]], prior) for f in kept}
        worst = max(trials, key=trials.get)
        if trials[worst] < current - tolerance:
            break
        kept.remove(worst)
        current = trials[worst]
        trace.append({"step": len(trace), "dropped": worst, "criterion": current})
        say(f"drop {worst:24s} -> {current:.4f}")
    return kept, trace
