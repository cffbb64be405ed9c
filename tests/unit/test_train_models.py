"""The trainers of the need classifier and the ranker on small synthetic data: what they fit
is a working model, cross-validation leaves books out, and the budget packing mirrors
evidence.select (the floor's top row always in)."""
from __future__ import annotations

import numpy as np

from pagerag.retrieve.need import CLASSES, NeedModel
from pagerag.retrieve.pool import FEATURES, TEXT_FEATURES
from pagerag.retrieve.ranker import RankerModel
from pagerag.train import need as need_trainer
from pagerag.train import ranker as ranker_trainer
from pagerag.train.ranker_data import QuestionPool


def test_need_model_learns_separable_classes_and_round_trips():
    rng = np.random.default_rng(0)
    rows, vecs = [], []
    for i in range(90):
        label = CLASSES[i % 3]
        v = rng.normal(scale=0.1, size=8)
        v[CLASSES.index(label)] += 1.0
        rows.append({"id": str(i), "book": f"b{i % 5}", "question": "What is it?", "label": label})
        vecs.append(v)
    vecs = np.array(vecs)
    pred = need_trainer.leave_books_out(rows, vecs, c=1.0, use_cues=False)
    y = np.array([r["label"] for r in rows])
    assert need_trainer.macro_accuracy(y, pred) > 0.9
    model = need_trainer.fit(need_trainer.design(rows, vecs, False), y, 1.0, False)
    again = NeedModel.from_json(model.to_json())
    probs = again.probabilities("What is it?", vecs[1])
    assert max(probs, key=probs.get) == y[1] and abs(sum(probs.values()) - 1) < 1e-3


def _pool(qid: str, book: str, rng) -> QuestionPool:
    rows = np.arange(12)
    gold = {2, 7}
    x = rng.normal(scale=0.3, size=(12, len(FEATURES)))
    x[list(gold), FEATURES.index("links")] += 2.0  # a graph feature that marks the gold rows
    text_x = rng.normal(scale=0.3, size=(8, len(TEXT_FEATURES)))
    return QuestionPool(qid, book, "Complex Reasoning", x, rows, text_x, rows[:8], {int(r): 200 for r in rows}, gold,
                        [{2}, {7}], text_rank1=0)


def test_ranker_trainer_fits_a_model_that_finds_the_gold_rows_on_held_out_books():
    rng = np.random.default_rng(1)
    pools = [_pool(f"q{i}", f"b{i % 3}", rng) for i in range(30)]
    per_q = ranker_trainer.cross_validate(pools, "graph", c=1.0)
    assert set(per_q) == {p.qid for p in pools}
    assert np.mean(list(per_q.values())) > 0.9
    model = ranker_trainer.fit_model(pools, "graph", 1.0)
    assert model.features == FEATURES and model.weights[FEATURES.index("links")] > 0
    again = RankerModel.from_json("graph", model.to_json())
    assert np.allclose(again.score(pools[0].graph_x), model.score(pools[0].graph_x), atol=1e-4)


def test_packing_keeps_the_floors_top_row_and_the_budget():
    tokens = {0: 150, 1: 120, 2: 100, 3: 90}
    rows, scores = np.array([0, 1, 2, 3]), np.array([0.1, 0.9, 0.8, 0.7])
    assert ranker_trainer.packed(rows, scores, tokens, budget=300) == {1, 2}  # 3 would make 310
    assert ranker_trainer.packed(rows, scores, tokens, budget=300, keep=0) == {0, 1}
    pool = QuestionPool("q", "b", "t", np.zeros((4, 1)), rows, np.zeros((4, 1)), rows, tokens, {1}, [{1}, {3}, set()])
    assert ranker_trainer.recall(pool, {1, 2}) == 1 / 3


def test_standardise_z_scores_and_leaves_near_constant_inputs_unscaled():
    from pagerag.train.logistic import Standardise

    rng = np.random.default_rng(3)
    x = np.column_stack([rng.normal(2.0, 3.0, 50), np.full(50, 0.5), 0.5 + rng.normal(0, 1e-6, 50)])
    s = Standardise().fit(x)
    assert np.allclose(s.mean_, x.mean(axis=0)) and np.isclose(s.scale_[0], x[:, 0].std())
    assert s.scale_[1] == 1.0 and s.scale_[2] == 1.0  # constant, and std below 1e-4: unscaled


def _by_hand(pools, name, c):
    """The leave-one-book-out loop the scikit-learn cross-validation replaced."""
    out = {}
    for book in sorted({p.book for p in pools}):
        model = ranker_trainer.fit_model([p for p in pools if p.book != book], name, c)
        for p in pools:
            if p.book == book:
                x, rows = ranker_trainer.variant(p, name)
                out[p.qid] = ranker_trainer.recall(p, ranker_trainer.packed(rows, model.score(x), p.tokens,
                                                                            keep=p.text_rank1))
    return out


def test_ranker_cross_validation_matches_a_hand_written_leave_one_book_out_loop():
    rng = np.random.default_rng(2)
    pools = []
    for i in range(24):  # books interleaved, pools of different sizes, weak signal: recall varies
        n = 6 + i % 7
        x = rng.normal(size=(n, len(FEATURES)))
        gold = {int(g) for g in rng.choice(n, size=2, replace=False)}
        x[sorted(gold), FEATURES.index("links")] += 0.8
        tokens = {r: int(rng.integers(150, 700)) for r in range(n)}
        pools.append(QuestionPool(f"q{i}", f"b{i % 4}", "Fact Retrieval", x, np.arange(n),
                                  rng.normal(size=(n, len(TEXT_FEATURES))), np.arange(n), tokens, gold,
                                  [{g} for g in sorted(gold)], text_rank1=int(rng.integers(-1, n))))
    for name in ("graph", "text"):
        got = ranker_trainer.cross_validate(pools, name, 0.3)
        want = _by_hand(pools, name, 0.3)
        assert got == want and len(set(want.values())) > 1


def test_need_cross_validation_matches_a_hand_written_leave_one_book_out_loop():
    rng = np.random.default_rng(4)
    rows = [{"id": str(i), "book": f"b{i % 4}", "question": "Who? " * (1 + i % 3), "label": CLASSES[i % 3]}
            for i in range(80)]
    vecs = rng.normal(size=(80, 6))
    vecs[np.arange(80), np.arange(80) % 3] += 0.7
    for cues in (False, True):
        got = need_trainer.leave_books_out(rows, vecs, 0.1, cues)
        x, y = need_trainer.design(rows, vecs, cues), np.array([r["label"] for r in rows])
        books = np.array([r["book"] for r in rows])
        want = np.empty(len(rows), dtype=object)
        for book in sorted(set(books)):
            m = need_trainer.fit(x[books != book], y[books != book], 0.1, cues)
            logits = ((x[books == book] - m.mean) / m.scale) @ m.weights.T + m.bias
            want[books == book] = np.array(CLASSES)[logits.argmax(axis=1)]
        assert list(got) == list(want)
