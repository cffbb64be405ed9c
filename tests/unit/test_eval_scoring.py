"""Scoring against hand-made cases: normalisation, aliases, punctuation, yes/no, numbers,
lenient token recall, refusals, evidence recall over joined citations, BBS and aggregation."""
from __future__ import annotations

import pytest

from pagerag.evaluate.formats import QAItem
from pagerag.evaluate.scoring import (cited_text, evidence_recall, lenient_by_recall, normalise, score_answer,
                                      strict_match, token_recall)
from pagerag.evaluate.summary import bbs, percentile, summarise


def item(answers, answerable=True, evidence=(), verbatim=True) -> QAItem:
    return QAItem("q1", "What?", answerable, list(answers), list(evidence), "fact" if answerable else "unanswerable",
                  "DEV", evidence_verbatim=verbatim)


@pytest.mark.parametrize("text, expected", [
    ("The Tolleys' house", "tolleys house"),
    ("Hobbs\u2019s nephew, Silas!", "hobbs nephew silas"),
    ("twenty-five pounds", "25 pounds"),
    ("1,000 guineas", "1000 guineas"),
    ("a hundred years", "100 years"),
    ("cash-boxes;  keys", "cash boxes keys"),
    ("The 1st of March, 1879", "1 of march 1879"),
])
def test_normalise(text, expected):
    assert normalise(text) == expected


@pytest.mark.parametrize("answer, golds, expected", [
    ("Ned earns twelve pence a week [1].", ["twelve pence a week"], True),
    ("He earns 12 pence.", ["twelve pence a week", "12 pence"], True),  # alias
    ("He earns twelve pence.", ["twelve pence a week"], False),  # gold not contained
    ("\u201cLambeth Walk,\u201d he said.", ["Lambeth Walk"], True),  # punctuation and curly quotes
    ("He ran to lambeth-walk", ["Lambeth Walk"], True),
    ("He has been dead 17 years", ["seven", "7"], False),  # whole words only
    ("Dead these seven years.", ["seven years"], True),
    ("No, he never does.", ["no"], True),
    ("Not at all, nobody knows.", ["no"], False),  # "not"/"nobody" are not "no"
    ("Yes. No one else came.", ["yes"], True),  # the first yes/no word decides
    ("No. Yes, later.", ["yes"], False),
    ("", ["anything"], False),
])
def test_strict_match(answer, golds, expected):
    assert strict_match(answer, golds) is expected


def test_token_recall_uses_content_words_and_best_alias():
    gold = ["oil-lamps, ropes, lanterns, barrels, anchors, and heavy chains forged in iron"]
    assert token_recall("oil-lamps and ropes and lanterns", gold) == pytest.approx(0.4)
    assert not lenient_by_recall("oil-lamps and ropes and lanterns", gold)
    assert lenient_by_recall("It was made of oil-lamps, ropes, lanterns, barrels and anchors", gold)
    assert token_recall("the man of the hour", ["the Keeper of the Northern Pier", "a keeper"]) == 0.0
    assert token_recall("a keeper", ["the Keeper of the Northern Pier", "a keeper"]) == 1.0


def test_answer_on_unanswerable_is_not_a_refusal_and_refusal_is_correct():
    unanswerable = item([], answerable=False)
    assert score_answer(unanswerable, "refused", "The evidence is insufficient.", []).correct_refusal is True
    answered = score_answer(unanswerable, "answered", "Fifty pounds [1].", [])
    assert answered.correct_refusal is False and not answered.lenient


def test_refusal_on_answerable_is_a_false_refusal_and_wrong():
    s = score_answer(item(["Lambeth Walk"]), "refused", "The evidence is insufficient: Lambeth Walk is not named.", [])
    assert s.false_refusal is True and not s.strict and not s.lenient  # the refusal text is never scored


def test_lenient_is_token_recall_without_a_judge_and_citation_marks_are_ignored():
    s = score_answer(item(["Fezziwig's warehouse"]), "answered", "At old Fezziwig's [1] [2].", [])
    assert s.lenient_method == "token-recall" and s.lenient and not s.strict
    s2 = score_answer(item(["12"]), "answered", "See excerpt [12].", [])
    assert not s2.strict and not s2.lenient  # "[12]" is a citation, not the number twelve


def citation(start, end, quote, file="book.txt"):
    return {"file": file, "start": start, "end": end, "quote": quote}


def test_evidence_recall_joins_overlapping_and_touching_citations():
    source = "Tolliver was dead, to begin with.\nThere is no doubt\nwhatever about that. The register was signed."
    cut = source.index("There")
    end = source.index(" The register")
    first = citation(0, cut - 1, source[:cut - 1])  # the newline between them is cited by neither
    second = citation(cut, end, source[cut:end])
    gold = ["to begin with. There is no doubt whatever about that."]
    assert evidence_recall(gold, [first]) == 0.0
    assert evidence_recall(gold, [second, first]) == 1.0
    overlapping = [citation(0, 40, source[0:40]), citation(20, end, source[20:end])]
    assert cited_text(overlapping) == [" ".join(source[:end].split())]
    other_file = [first, citation(cut, end, source[cut:end], file="other.txt")]
    assert evidence_recall(gold, other_file) == 0.0
    assert evidence_recall(["x", "Tolliver was dead"], [first]) == 0.5
    assert evidence_recall([], [first]) is None


def test_paraphrased_evidence_is_not_measured():
    s = score_answer(item(["Cornish heath"], evidence=["A paraphrase."], verbatim=False), "answered", "Cornish heath", [])
    assert s.evidence_recall is None and s.strict


def row(answerable, strict=False, lenient=False, refused=False, latency=1.0, prompt=0, kind=None):
    score = {"strict": strict, "lenient": lenient, "lenient_method": "token-recall", "evidence_recall": None,
             "correct_refusal": refused if not answerable else None, "false_refusal": refused if answerable else None}
    return {"pipeline": "full", "dataset": "D", "type": kind or ("fact" if answerable else "unanswerable"),
            "answerable": answerable, "score": score, "decision": "refused" if refused else "answered",
            "reason": "insufficient_evidence" if refused else None, "latency_s": latency, "prompt_tokens": prompt,
            "completion_tokens": 0, "budget_tokens": 2000}


def test_summary_counts_bbs_and_latency_percentiles():
    rows = [row(True, True, True, latency=1), row(True, False, True, latency=2), row(True, refused=True, latency=3),
            row(True, latency=4), row(False, refused=True, latency=5), row(False, latency=10)]
    s = summarise(rows, build_tokens=1234)
    assert (s["strict_acc"], s["lenient_acc"]) == (0.25, 0.5)
    assert (s["correct_refusals"], s["unanswerable"], s["false_refusals"]) == (1, 2, 1)
    assert s["bbs"] == pytest.approx(2 * 0.5 * 0.5 / 1.0)
    assert s["latency_median_s"] == pytest.approx(3.5) and s["latency_p95_s"] == pytest.approx(8.75)
    assert s["btok"] == 1234 and s["answered_unanswerable"] == 1
    assert s["refusal_reasons"] == {"insufficient_evidence": 2}


def test_bbs_matches_the_paper_and_is_undefined_without_both_kinds():
    assert 100 * bbs(0.901, 1.0) == pytest.approx(94.8, abs=0.05)  # Table 3, Full PAGE-RAG
    assert 100 * bbs(0.951, 4 / 24) == pytest.approx(28.4, abs=0.05)  # No Evidence Constraint
    assert bbs(0.9, None) is None and bbs(0.0, 0.0) == 0.0
    assert summarise([row(True, True, True)])["bbs"] is None
    assert percentile([], 50) is None and percentile([4.0], 95) == 4.0
