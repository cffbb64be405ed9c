"""The book models on synthetic feature tables: the stacked fit (RCS, sentence ranker, sufficiency
on held-out level-1 values), thresholds read off held-out curves for a target CWAR, JSON round
trips, and the policy replay."""
from __future__ import annotations

import numpy as np
import pytest

from pagerag.confidence.metrics import auc_ac
from pagerag.confidence.model import RCSModel
from pagerag.generate.sentences import SENTENCE_FEATURES
from pagerag.generate.sufficiency import SUFFICIENCY_FEATURES
from pagerag.train.features import SENT_LABELS
from pagerag.train.policy import Operating, replay, scores
from pagerag.train.stack import Config, Example, Stack, Variant, curve_of

RCS_NAMES = ["hop1_max", "query_len"]


def variant(rng, answerable: bool) -> Variant:
    """Eight sentences; an answerable example's third sentence is the answer and stands out."""
    sents = rng.normal(size=(8, len(SENTENCE_FEATURES))) * 0.3
    labels = np.zeros((8, len(SENT_LABELS)), dtype=np.int64)
    if answerable:
        sents[2, SENTENCE_FEATURES.index("lex")] += 2.0
        sents[2, SENTENCE_FEATURES.index("dense")] += 1.0
        labels[2] = 1
    rcs = {"hop1_max": float(rng.normal(0.6 if answerable else 0.4, 0.1)), "query_len": float(rng.integers(5, 20))}
    level = {"names_evidence": 1.0, "attr_span": float(rng.uniform(0.5, 1.0) if answerable else rng.uniform(0, 0.6))}
    flag = int(answerable)
    return Variant(rcs, sents, labels, level, {"rcs": flag, "suff": flag}, {})


def tables(seed=0, books=("A", "B", "C", "D")) -> list[Example]:
    rng = np.random.default_rng(seed)
    out = []
    for b in books:
        for i in range(60):
            answerable = i % 5 < 3
            v = {"default": variant(rng, answerable), "widened": variant(rng, answerable)}
            out.append(Example(f"{b}-{i}", b, "answerable" if answerable else "masked", "Fact Retrieval",
                               "other", True, v))
    return out


@pytest.fixture(scope="module")
def stack():
    return Stack.fit(tables(), Config(rcs_features=RCS_NAMES))


def test_the_stack_fits_three_logistic_models(stack):
    assert stack.level1.rcs.feature_names == RCS_NAMES
    assert stack.level1.ranker.feature_names == list(SENTENCE_FEATURES)
    assert stack.suff.feature_names == list(SUFFICIENCY_FEATURES)
    # the sufficiency model was fitted on held-out level-1 values, and its held-out scores separate
    held, y, books = stack.held_out["suff"]
    assert sorted(set(books)) == ["A", "B", "C", "D"] and held.size == y.size == 240
    assert auc_ac(held, y) > 0.9 > y.mean()
    assert stack.suff.curve and stack.level1.rcs.curve


def test_the_ranker_puts_the_answer_sentence_first(stack):
    e = tables(seed=1)[0]
    order, probs = stack.level1.ranked(e.variants["default"])
    assert order[0] == 2 and probs[0] == probs.max()


def test_tau_for_a_target_cwar_reads_the_held_out_curve(stack):
    held, y, _ = stack.held_out["suff"]
    for target in (0.05, 0.1, 0.3):
        tau = stack.suff.tau_for(target)
        answered = held >= tau
        assert answered.any() and 1 - y[answered].mean() <= target + 1e-9
    assert stack.suff.tau_for(0.05) >= stack.suff.tau_for(0.3)
    assert stack.suff.tau_for(None) == stack.suff.tau
    # no threshold reaches an impossible target: refuse everything seen
    assert stack.suff.tau_for(1e-9) > held.max() or 1 - y[held >= stack.suff.tau_for(1e-9)].mean() == 0


def test_curve_points_are_cwar_and_coverage_of_the_confident_set():
    scores_ = np.array([0.9, 0.8, 0.8, 0.3, 0.1])
    labels = np.array([1, 1, 0, 0, 0])
    curve = curve_of(scores_, labels)
    assert curve[0] == [0.9, 0.0, 0.2]
    assert [0.8, pytest.approx(1 / 3, abs=1e-6), 0.6] in curve  # the tie group counts whole
    assert curve[-1] == [0.1, 0.6, 1.0]


def test_models_round_trip_through_json_with_their_curve(stack, tmp_path):
    path = stack.suff.save(tmp_path / "sufficiency.json")
    loaded = RCSModel.load(path)
    assert loaded.curve == stack.suff.curve
    assert loaded.tau_for(0.1) == stack.suff.tau_for(0.1)
    e = tables(seed=2)[0]
    feats = stack.level1.sufficiency_features(e, "default", llm=False)
    assert loaded.score(feats) == pytest.approx(stack.suff.score(feats))


def test_policy_replay_refuses_unanswerable_and_answers_with_the_top_sentence(stack):
    held = tables(seed=3, books=("E",))
    outcomes = replay(stack, held, Operating(gate_cwar=None, suff_cwar=0.1))
    s = scores(outcomes)
    assert s["correct_refusal"] >= 0.6 and s["false_refusal"] <= 0.3
    assert s["lenient"] == pytest.approx(1 - s["false_refusal"])  # every answered top sentence is the labelled one
    assert {o.reason for o in outcomes} <= {None, "insufficient_evidence"}
    cautious = scores(replay(stack, held, Operating(gate_cwar=None, suff_cwar=0.02)))
    assert cautious["correct_refusal"] >= s["correct_refusal"] and cautious["false_refusal"] >= s["false_refusal"]
    strict_gate = replay(stack, held, Operating(gate_cwar=0.001, suff_cwar=0.1))
    assert sum(o.reason == "low_retrieval_confidence" for o in strict_gate) > 0
