"""Reading a question without an LLM: expected answer type, names, attribute words, candidates."""
from __future__ import annotations

import pytest

from pagerag.generate.question import answer_type, read_question, type_candidates, typed_span
from pagerag.text.words import stem


@pytest.mark.parametrize(
    "question, kind",
    [
        ("What is the surname of the innkeeper?", "person"),
        ("What was the name of the ship the captain sailed?", "person"),
        ("What are the first names of the two sisters?", "person"),
        ("During the siege of the town, who commanded the second company?", "person"),
        ("In what year did the author die?", "year"),
        ("When did the travellers start their journey?", "date"),
        ("On what day did the fair take place?", "date"),
        ("How old was the miller's son when he left home?", "age"),
        ("How much money did the farmer pay the smith?", "money"),
        ("What rent does the widow pay for the cottage?", "money"),
        ("How many ships were in the harbour?", "count"),
        ("Where does the schoolmaster live?", "place"),
        ("To which town did the family move?", "place"),
        ("What does the old woman carry to market?", "other"),
        ("What was the man doing when the storm broke?", "other"),  # "when" inside a clause is no date question
    ],
)
def test_answer_type_comes_from_the_question_word(question, kind):
    assert answer_type(question).name == kind


def test_names_and_attributes_are_separated():
    terms = read_question("How much money did old Joe pay the charwoman for the bed-curtains and blankets?")
    assert terms.names == ["Joe"]
    # "old" describes Joe; "money"/"much" only say what kind of value is asked
    assert terms.attribute_words == ["pay", "charwoman", "bed-curtains", "blankets"]
    assert terms.answer.name == "money" and terms.answer.typed


def test_names_stop_at_punctuation_and_drop_possessives():
    terms = read_question("Scrooge drives away a boy on Christmas Eve. What does Scrooge wish?")
    assert "Christmas Eve" in terms.names
    assert all("What" not in name for name in terms.names)
    assert read_question("What is Martha Cratchit's occupation?").names == ["Martha Cratchit"]


def test_relational_questions_are_flagged():
    assert read_question("How is the vicar's nephew Tom connected to his sister Ann?").relational
    assert not read_question("What is Tom's surname?").relational


def test_stemmer_matches_inflections():
    assert stem("brothers") == stem("brother")
    assert stem("charged") == stem("charge") == stem("charges")
    assert stem("paid") == stem("pays")


def _texts(kind: str, text: str, question: str) -> list[str]:
    return [text[s:e] for s, e in type_candidates(kind, text, read_question(question))]


def test_money_candidates_need_an_amount():
    assert _texts("money", "He paid fifteen shillings a week.", "How much did Joe pay?") == ["fifteen shillings"]
    assert _texts("money", "'Not a farthing less,' said the landlord.", "How much did Joe pay?") == []
    assert _texts("money", "It cost him £40 and sixpence.", "How much did it cost?") == ["£40", "sixpence"]


def test_candidates_the_question_states_are_not_answers():
    assert _texts("year", "It appeared in 1843 and again in 1915.", "Which house published it in 1843?") == ["1915"]


def test_dates_counts_and_names():
    assert _texts("date", "They left on Tuesday, the 3rd of May, at nine o'clock.", "When did they leave?") == [
        "Tuesday", "3rd of May", "nine o'clock"]
    assert _texts("count", "Twelve men and 40 horses crossed.", "How many men crossed?") == ["Twelve", "40"]
    assert _texts("person", "The ship was commanded by Captain Ahab, and Starbuck was mate.",
                  "Who commanded the ship?") == ["Captain Ahab", "Starbuck"]


def test_typed_span_is_the_shortest_candidate():
    terms = read_question("How much did the room cost?")
    text = "The room cost two pounds ten shillings in all."
    start, end = typed_span("money", text, terms)
    assert text[start:end] == "two pounds"
    assert typed_span("money", "The room was cold.", terms) is None
