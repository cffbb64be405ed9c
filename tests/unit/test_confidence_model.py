"""RCS logistic model: fitting, JSON round trip, scoring speed, threshold selection."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

from pagerag.confidence.calibrate import fit_from_labelled
from pagerag.confidence.metrics import cwar_at_threshold
from pagerag.confidence.model import RCSModel, fit_logistic
from pagerag.errors import PageRAGError


def synthetic(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5] + [0.0, 5.0, -1.0]
    logit = 1.5 * X[:, 0] - 0.5 * (X[:, 1] - 5.0) + 0.0 * X[:, 2] - 0.3
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(float)
    return X, y


def test_fit_reaches_the_cross_entropy_optimum():
    X, y = synthetic()
    Z = (X - X.mean(0)) / X.std(0)
    w, b = fit_logistic(Z, y, l2=0.0)
    p = 1 / (1 + np.exp(-(Z @ w + b)))
    grad = np.r_[Z.T @ (p - y), np.sum(p - y)] / len(y)
    assert np.abs(grad).max() < 1e-6  # stationary point of a convex loss = the optimum
    # and it recovers the generating weights (scaled back from z-scores)
    assert w[0] / X[:, 0].std() == pytest.approx(1.5, abs=0.2)
    assert w[1] / X[:, 1].std() == pytest.approx(-0.5, abs=0.1)
    assert abs(w[2]) < 0.15


def test_json_round_trip_scores_identically(tmp_path):
    X, y = synthetic(800)
    model = RCSModel.fit(X, y, ["a", "b", "c"], tau=0.61, target_cwar=0.25, training={"set": "synthetic"})
    path = model.save(tmp_path / "rcs.json")
    loaded = RCSModel.load(path)
    assert json.loads(path.read_text())["feature_names"] == ["a", "b", "c"]
    assert loaded.tau == 0.61 and loaded.training == {"set": "synthetic"}
    for row in X[:50]:
        feats = dict(zip("abc", row))
        assert loaded.score(feats) == pytest.approx(model.score(feats), abs=1e-15)
    assert np.allclose(loaded.score_matrix(X), model.score_matrix(X))
    # single-query scoring equals the batch path
    assert model.score(dict(zip("abc", X[7]))) == pytest.approx(model.score_matrix(X[7:8])[0])


def test_scoring_one_query_takes_under_50_microseconds():
    X, y = synthetic(500)
    names = [f"f{i}" for i in range(12)]
    Xw = np.hstack([X, np.random.default_rng(3).normal(size=(500, 9))])
    model = RCSModel.fit(Xw, y, names)
    feats = dict(zip(names, Xw[0]))
    model.score(feats)
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        model.score(feats)
    per_call = (time.perf_counter() - start) / n
    assert per_call < 50e-6, f"{per_call * 1e6:.1f} us per score"


def test_missing_feature_and_bad_file_are_clear_errors(tmp_path):
    X, y = synthetic(300)
    model = RCSModel.fit(X, y, ["a", "b", "c"])
    with pytest.raises(PageRAGError, match="'c'"):
        model.score({"a": 1.0, "b": 2.0})
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something-else"}')
    with pytest.raises(PageRAGError, match="not an RCS model"):
        RCSModel.load(bad)
    with pytest.raises(PageRAGError, match="all the same"):
        RCSModel.fit(X, np.ones(len(y)), ["a", "b", "c"])


def test_fit_from_labelled_sets_tau_for_the_target_cwar():
    X, y = synthetic(1000, seed=5)
    rows = [dict(zip("abc", r)) for r in X]
    model = fit_from_labelled(rows, y.tolist(), target_cwar=0.15)
    scores = model.score_matrix(X)
    cwar, coverage = cwar_at_threshold(scores, y, model.tau)
    assert cwar <= 0.15 and 0 < coverage < 1
    # a slightly lower threshold would admit more queries and break the target (tau is minimal)
    lower = scores[scores < model.tau].max()
    assert cwar_at_threshold(scores, y, lower)[0] > 0.15
    assert model.training["n"] == 1000 and model.metrics["calibration_cwar"] == pytest.approx(cwar)


def test_packaged_models_load_and_score():
    from pagerag.confidence.features import PAPER_FEATURES
    from pagerag.confidence.model import DEFAULT_MODEL_PATH, PAPER_MODEL_PATH
    from pagerag.evaluate.rcs.run import RCS_FEATURES

    default = RCSModel.load(DEFAULT_MODEL_PATH)
    paper = RCSModel.load(PAPER_MODEL_PATH)
    assert default.feature_names == list(RCS_FEATURES) and paper.feature_names == list(PAPER_FEATURES)
    for model in (default, paper):
        assert 0.0 < model.tau < 1.0 and model.training["n"] > 500
        typical = dict(zip(model.feature_names, model.mean))  # the average training query
        assert 0.05 < model.score(typical) < 0.95
    # the evidence already holding the next hop must raise confidence
    w = dict(zip(default.feature_names, default.weights))
    assert w["bridge_margin"] > 0
