"""The no-LLM sufficiency rule, sentence by sentence, and the extractive choice it feeds."""
from __future__ import annotations

from pagerag.generate.extractive import best_sentence, quote_span
from pagerag.generate.question import read_question
from pagerag.generate.support import assess
from pagerag.records import Window
from pagerag.text.sentences import split_sentences


def _windows(*texts: str) -> tuple[list[Window], dict[str, str]]:
    """One evidence span per text, one window covering it (offsets relative to each text)."""
    windows = [Window(f"doc:{i}", "doc", "doc.txt", 0, len(t), t, split_sentences(t)) for i, t in enumerate(texts)]
    return windows, {f"doc:{i}": t for i, t in enumerate(texts)}


def flat_idf(_stem: str) -> float:
    return 1.0


def _judge(question: str, *texts: str, threshold: float = 0.2):
    windows, spans = _windows(*texts)
    return assess(read_question(question), windows, spans, flat_idf, threshold)


def test_amount_next_to_the_attribute_is_sufficient():
    support = _judge("How much did Joe pay the charwoman for the curtains?",
                     "The curtains came down. Joe paid the charwoman two shillings for them. She laughed.")
    assert support.sufficient
    assert support.best.candidates == ["two shillings"]


def test_same_people_without_the_asked_value_is_insufficient():
    support = _judge("How much did Joe pay the charwoman for the curtains?",
                     "Joe looked at the curtains. The charwoman laughed and Joe paid her. Nobody said how much.")
    assert not support.sufficient
    assert support.type_found is False
    assert "never states the sum of money" in support.missing


def test_an_amount_far_from_the_attribute_does_not_count():
    support = _judge("How much did Joe pay the charwoman for the curtains?",
                     "Joe paid the charwoman for the curtains. Then they talked of the weather at length. "
                     "It was a cold night. Years later Joe won ten pounds at cards.")
    assert not support.sufficient


def test_a_question_about_what_the_book_never_discusses_is_insufficient():
    support = _judge("In which London publishing house was A Christmas Carol first issued?",
                     "A Christmas Carol in prose, being a ghost story of Christmas. Marley was dead.")
    assert not support.sufficient
    assert "says nothing about" in support.missing and "'publishing'" in support.missing


def test_names_absent_from_the_evidence_are_reported():
    support = _judge("What did Topper give Belle?", "Scrooge gave the boy a shilling. The boy ran off.")
    assert not support.sufficient
    assert support.missing.startswith("the evidence does not mention")


def test_relational_questions_need_two_names_together():
    question = "How is Fred related to Fan?"
    assert _judge(question, "Fan had one child, Fred, who loved his uncle.").sufficient
    assert not _judge(question, "Fan came to fetch the boy. Many years passed. The city grew. Fred laughed loudly.").sufficient


def test_surname_questions_refuse_without_a_surname():
    assert not _judge("What is Fred's surname?", "'Fred!' said Scrooge. Fred laughed at his uncle.").sufficient
    assert _judge("What is Bob's surname?", "Bob Cratchit ran home to Camden Town.").sufficient


def test_extractive_choice_prefers_the_passing_sentence_and_extends_short_ones():
    windows, spans = _windows("'Yes.' Scrooge paid his clerk fifteen shillings a week, and no more. He was mean.")
    support = assess(read_question("How much did Scrooge pay his clerk?"), windows, spans, flat_idf, 0.2)
    choice = best_sentence(support)
    start, end = quote_span(choice)
    assert "fifteen shillings" in spans["doc:0"][start:end]
    windows, spans = _windows("Scrooge paid his clerk. 'Ten pounds.' That was all.")
    support = assess(read_question("How much did Scrooge pay his clerk?"), windows, spans, flat_idf, 0.2)
    start, end = quote_span(best_sentence(support))
    assert spans["doc:0"][start:end].startswith("Scrooge paid his clerk.")  # a too-short quote takes a neighbour
