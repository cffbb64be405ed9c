"""Labelling for `pagerag calibrate`: quotes inside the evidence, question file parsing."""
from __future__ import annotations

import pytest

from pagerag.evaluate.calibrate import evidence_contains_all, load_labelled_questions
from pagerag.errors import PageRAGError


def test_every_quote_must_be_inside_the_evidence():
    evidence = ["\u2018Mr. Tolliver has been gone these seven years,\u2019 Hobbs replied.",
                "He sailed nine winters ago,", "that same evening."]
    assert evidence_contains_all(evidence, ["'Mr. Tolliver has been   gone these seven years,'"])
    # a quote straddling two adjacent passages counts (evidence joined in order)
    assert evidence_contains_all(evidence, ["He sailed nine winters ago, that same evening."])
    assert not evidence_contains_all(evidence, ["seven years", "Ned Tolley"])


def test_question_file_keeps_answerable_questions_with_quotes(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "a", "question": "Q1?", "answerable": true, "evidence": ["x"]}\n'
                    '{"id": "b", "question": "Q2?", "answerable": false, "evidence": []}\n'
                    '{"id": "c", "question": "Q3?", "evidence": ["y", "z"]}\n', encoding="utf-8")
    rows = load_labelled_questions(path)
    assert [r["id"] for r in rows] == ["a", "c"] and rows[1]["evidence"] == ["y", "z"]
    path.write_text('{"question": "Q?", "answerable": false}\n', encoding="utf-8")
    with pytest.raises(PageRAGError, match="no answerable questions"):
        load_labelled_questions(path)
