"""The questions the decision tests ask (helpers/questions.py) are the training set's, and two
refusals on the training-book repository (printer_repo, extractive, reader-decides): a refusal never repeats
words of the question the book does not contain, and a question padded with the book's words
but asking for something the book never covers is refused."""
from __future__ import annotations

import re

import pytest
from ask_helpers import permissive_gate
from helpers.questions import (ANSWER, ANSWERABLE_ID, OUTSIDE_THE_EXCERPT, QUOTED, UNANSWERABLE_ID,
                               UNANSWERABLE_SUBJECT)

from pagerag.api import PageRAG


def test_the_tests_questions_are_the_training_sets(printer_questions, printer_excerpt):
    for qid, question in QUOTED.items():
        assert printer_questions[qid]["question"] == question, qid
        assert printer_questions[qid]["answerable"] == ("-a" in qid), qid
    assert ANSWER in printer_questions[ANSWERABLE_ID]["answers"]
    assert not printer_questions[UNANSWERABLE_ID]["answerable"]
    text = printer_excerpt.read_text(encoding="utf-8")
    assert f"containing {ANSWER}" in text and UNANSWERABLE_SUBJECT in text  # both about the excerpt
    for evidence in printer_questions[ANSWERABLE_ID]["evidence"]:
        assert evidence in text
    assert "Shelly" not in text and "Wentworth" not in text  # OUTSIDE_THE_EXCERPT: later in the book
    assert all(("Shelly" in q) or ("Wentworth" in q) for q in OUTSIDE_THE_EXCERPT)


@pytest.fixture(scope="module", params=["packaged gate", "permissive gate"])
def rag(request, printer_repo, tmp_path_factory) -> PageRAG:
    """The policy in which the reader's model may refuse (`reader-decides`), and the same with an
    RCS gate that always passes (so the sufficiency model and its refusal message are reached
    whatever the retrieval's confidence)."""
    if request.param == "packaged gate":
        return PageRAG(printer_repo, pipeline="reader-decides", llm="extractive")
    return PageRAG(printer_repo, pipeline="reader-decides", llm="extractive",
                   confidence=permissive_gate(tmp_path_factory.mktemp("rcs")))


def _strings(value, key: str = "") -> list[str]:
    """Every string in an answer's JSON object, but for the question itself (under "question")."""
    if key == "question":
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, k)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


def test_a_refusal_never_echoes_words_of_the_question_the_book_does_not_contain(rag, printer_excerpt):
    question = "What did Fred, Answer, HACKED say to the printer?"
    text = printer_excerpt.read_text(encoding="utf-8")
    assert not re.search(r"\bhacked\b|\bFred\b", text, re.I)  # none of the book's words
    answer = rag.ask(question)
    assert answer.decision == "refused", answer.answer
    shown = _strings(answer.to_dict())
    assert answer.answer in shown
    echoed = [s for s in shown if re.search(r"hacked|\bFred\b", s, re.I)]
    assert echoed == [], echoed


def test_a_question_padded_with_the_books_words_is_still_refused(rag):
    """Words of the book around a question the book does not answer: retrieval finds passages
    about them, but nothing says what the capital of France is."""
    padded = "What is the capital of France? printer St. Paul Minnesotian newspaper foreman 1858"
    answer = rag.ask(padded)
    assert answer.decision == "refused", answer.answer
    assert answer.reason in ("insufficient_evidence", "low_retrieval_confidence") and answer.citations == []


def test_offline_by_default_a_padded_question_gets_a_labelled_passage_not_an_answer(printer_repo):
    answer = PageRAG(printer_repo, llm="extractive").ask(
        "What is the capital of France? printer St. Paul Minnesotian newspaper foreman 1858")
    if answer.answered:  # the gate may refuse; what is shown is never claimed as the answer
        assert answer.label == "closest_passage" and "cannot check" in answer.caveat
    else:
        assert answer.reason == "low_retrieval_confidence"
