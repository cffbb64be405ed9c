"""The book models on synthetic feature tables: the stacked fit (RCS, then sufficiency on held-out
RCS and the reader's scores), thresholds read off held-out curves for a target CWAR, JSON round
trips, the policy replay, and nested leave-books-out (thresholds chosen without the scored book)."""
from __future__ import annotations

import numpy as np
import pytest

from pagerag.confidence.metrics import auc_ac
from pagerag.confidence.model import RCSModel, curve_of
from pagerag.generate.sufficiency import SUFFICIENCY_FEATURES
from pagerag.train.features import SENT_LABELS
from pagerag.train.fit import choose, nested, operating_points
from pagerag.train.policy import Operating, answer_quality, replay, scores
from pagerag.train.stack import USED_SENTENCE_FEATURES, Config, Example, Stack, Variant

RCS_NAMES = ["hop1_max", "query_len"]
LENIENT_EXT = SENT_LABELS.index("lenient_ext")


def variant(rng, answerable: bool) -> Variant:
    """Eight read sentences; an answerable example's third sentence states the answer: the reader
    says so (high P, a positive span margin) and its span is leniently right."""
    sents = rng.normal(size=(8, len(USED_SENTENCE_FEATURES))) * 0.3
    labels = np.zeros((8, len(SENT_LABELS)), dtype=np.int64)
    p = rng.uniform(0.01, 0.3, size=8)
    margin = rng.normal(-4, 1, size=8)
    span_lenient = np.zeros(8)
    if answerable:
        p[2], margin[2], span_lenient[2] = rng.uniform(0.6, 0.99), rng.normal(4, 1), 1
        labels[2, LENIENT_EXT] = 1
    rcs = {"hop1_max": float(rng.normal(0.6 if answerable else 0.4, 0.1)), "query_len": float(rng.integers(5, 20))}
    level = {"names_evidence": 1.0, "attr_span": float(rng.uniform(0.3, 1.0))}
    flag = int(answerable)
    reads = {"p": p, "margin": margin, "span_strict": span_lenient.copy(), "span_lenient": span_lenient}
    return Variant(rcs, sents, labels, level, {"rcs": flag, "suff": flag}, reads)


def tables(seed=0, books=("A", "B", "C", "D", "E")) -> list[Example]:
    rng = np.random.default_rng(seed)
    out = []
    for b in books:
        for i in range(60):
            answerable = i % 5 < 3
            kind = "answerable" if answerable else ("written" if i % 5 == 3 else "masked")
            v = {"default": variant(rng, answerable), "widened": variant(rng, answerable)}
            out.append(Example(f"{b}-{i}", b, kind, "fact" if i % 2 else "Fact Retrieval", True, v))
    return out


@pytest.fixture(scope="module")
def stack():
    return Stack.fit(tables(), Config(rcs_features=RCS_NAMES))


def test_the_stack_fits_rcs_and_sufficiency_on_held_out_values(stack):
    assert stack.rcs.feature_names == RCS_NAMES
    assert stack.suff.feature_names == list(SUFFICIENCY_FEATURES)
    examples = tables()
    assert len(stack.held_out) == 2 * len(examples)  # every variant of every example, held out
    held = np.array([stack.held_out[(e.id, "default")][1] for e in examples])
    y = np.array([e.variants["default"].labels["suff"] for e in examples], dtype=float)
    assert auc_ac(held, y) > 0.9 > y.mean()
    assert stack.suff.curve and stack.rcs.curve


def test_tau_for_a_target_cwar_reads_the_held_out_curve(stack):
    examples = tables()
    held = np.array([stack.held_out[(e.id, "default")][1] for e in examples])
    y = np.array([e.variants["default"].labels["suff"] for e in examples], dtype=float)
    for target in (0.05, 0.1, 0.3):
        tau = stack.suff.tau_for(target)
        answered = held >= tau
        assert answered.any() and 1 - y[answered].mean() <= target + 1e-9
    assert stack.suff.tau_for(0.05) >= stack.suff.tau_for(0.3)
    assert stack.suff.tau_for(None) == stack.suff.tau


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
    assert loaded.curve == stack.suff.curve and loaded.tau_for(0.1) == stack.suff.tau_for(0.1)
    e = tables(seed=2, books=("F",))[0]
    assert Stack(stack.rcs, loaded, stack.cfg).apply([e]) == stack.apply([e])


def test_the_answer_is_the_span_above_the_margin_and_the_sentence_below():
    e = tables(seed=4, books=("G",))[0]  # answerable: sentence 2, span leniently right, quote too
    v = e.variants["default"]
    v.sent_labels[2, LENIENT_EXT] = 0  # now only the span is right
    assert answer_quality(e, "default", float("-inf"))[1] is True
    assert answer_quality(e, "default", float("inf"))[1] is False


def test_policy_replay_refuses_unanswerable_and_answers_with_the_readers_sentence(stack):
    held = tables(seed=3, books=("H",))
    scored = stack.apply(held)
    tau = stack.suff.tau_for(0.1)
    s = scores(replay(held, scored, None, tau, Operating(None, 0.1, True, 0.0)))
    assert s["correct_refusal"] >= 0.8 and s["false_refusal"] <= 0.3
    assert s["lenient"] == pytest.approx(1 - s["false_refusal"])  # every answered question gets the right span
    cautious = scores(replay(held, scored, None, stack.suff.tau_for(0.01), Operating(None, 0.01)))
    assert cautious["correct_refusal"] >= s["correct_refusal"] and cautious["false_refusal"] >= s["false_refusal"]
    gated = replay(held, scored, 1.1, tau, Operating(0.001, 0.1))  # no RCS reaches 1.1: the gate refuses all
    assert all(o.reason == "low_retrieval_confidence" for o in gated)


def test_the_operating_point_is_chosen_on_held_out_scores_to_refuse_each_kind(stack):
    examples = tables()
    op, table = choose(examples, stack, operating_points())
    assert table["min_refusal"] >= 0.85 and set(table["refusal_by_group"]) == {"written", "synthetic"}
    assert op in operating_points()


def test_nested_leave_books_out_scores_every_book_with_thresholds_chosen_without_it():
    examples = tables(books=("A", "B", "C", "D"))  # the fewest books an inner leave-books-out still has 3 of
    result = nested(examples, Config(rcs_features=RCS_NAMES), log=lambda m: None)
    assert sorted(result["chosen_per_fold"]) == ["A", "B", "C", "D"]
    assert len(result["outcomes"]) == len(examples)
    assert result["all"]["correct_refusal"] >= 0.8 and result["p_auc_all"] > 0.9
    assert set(result["by_set"]) == {"written", "graphrag"}


def test_the_chooser_quotes_the_sentence_the_words_point_to_when_the_reader_misranks():
    """When the answer sentence holds the question's words (lex) but the reader puts another
    sentence first, the fitted chooser picks the answer sentence; without a chooser the replay
    quotes the reader's best."""
    from pagerag.generate.sentences import chooser_scores
    from pagerag.train.stack import fit_chooser

    rng = np.random.default_rng(3)
    examples = tables(seed=3)
    lex = USED_SENTENCE_FEATURES.index("lex")
    for e in examples:
        for v in e.variants.values():
            if e.answerable:
                v.reads["p"][5] = 0.995  # the reader's favourite is a wrong sentence
                v.sents[2, lex] = rng.uniform(0.8, 1.0)  # the answer sentence holds the question's words
    chooser = fit_chooser(examples)
    assert chooser["features"] == ["reader_logit", "lex", "dense"] and chooser["coef"][1] > 0
    answerable = [e for e in examples if e.answerable]
    reader_right = np.mean([answer_quality(e, "default", float("inf"))[1] for e in answerable])
    chooser_right = np.mean([answer_quality(e, "default", float("inf"), chooser)[1] for e in answerable])
    assert reader_right == 0.0 and chooser_right > 0.9
    v = answerable[0].variants["default"]
    scores_ = chooser_scores(chooser, v.reads["p"], v.sents[:, lex], v.sents[:, USED_SENTENCE_FEATURES.index("dense")])
    assert int(np.argmax(scores_)) == 2
