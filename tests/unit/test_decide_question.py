"""Reading a question without an LLM: expected answer type, names, attribute words, candidates."""
from __future__ import annotations

import pytest

from pagerag.generate.question import answer_type, read_question, type_candidates
from pagerag.text.words import stem


@pytest.mark.parametrize(
    "question, kind",
    [
        ("What is Fred's surname?", "surname"),
        ("What was the name of the man Belle married?", "naming"),
        ("What is the first name of Fred's wife?", "naming"),
        ("In what year did Charles Dickens die?", "year"),
        ("On what date did the travellers start their journey?", "date"),
        ("How old was young Scrooge when he began his apprenticeship?", "age"),
        ("How much money did old Joe pay the charwoman?", "money"),
        ("How much does Scrooge say his clerk earns per week?", "money"),
        ("What new salary did Scrooge give Bob Cratchit?", "money"),
        ("How many brothers does the Ghost say he has had?", "number"),
        ("What did Jacob Marley die of?", "cause"),
        ("Where does Bob Cratchit live?", "place"),
        ("Who moved the Logan rocking-stone in 1824?", "person"),
        ("What does the Ghost of Christmas Past carry?", "other"),
    ],
)
def test_answer_type(question, kind):
    assert answer_type(question).name == kind


def test_names_and_attributes_are_separated():
    terms = read_question("How much money did old Joe pay the charwoman for the bed-curtains and blankets?")
    assert terms.names == ["Joe"]
    # "old" describes Joe; "money"/"much" are the type cue, not the attribute
    assert terms.attribute_words == ["pay", "charwoman", "bed-curtains", "blankets"]
    assert terms.answer.name == "money"


def test_names_stop_at_punctuation_and_drop_possessives():
    terms = read_question("Scrooge drives away a boy on Christmas Eve. What does Scrooge wish?")
    assert "Christmas Eve" in terms.names
    assert all("What" not in name for name in terms.names)
    assert read_question("What is Martha Cratchit's occupation?").names == ["Martha Cratchit"]


def test_relational_questions_are_flagged():
    assert read_question("How is Scrooge's nephew Fred connected to Scrooge's sister Fan?").relational
    assert not read_question("What is Fred's surname?").relational


def test_stemmer_matches_inflections():
    assert stem("brothers") == stem("brother")
    assert stem("charged") == stem("charge") == stem("charges")
    assert stem("died") == stem("dead") == stem("death") == "die"
    assert stem("paid") == stem("pays")


def test_money_candidates_need_an_amount():
    terms = read_question("How much did Joe pay?")
    assert type_candidates("money", "He paid fifteen shillings a week.", terms) == ["fifteen shillings"]
    assert type_candidates("money", "'Not a farthing less,' said Scrooge.", terms) == []
    assert type_candidates("money", "I wouldn't give another sixpence.", terms) == ["sixpence"]


def test_year_candidates_exclude_years_the_question_states():
    terms = read_question("Which house published the Carol in 1843?")
    assert type_candidates("year", "It appeared in 1843 and again in 1915.", terms) == ["1915"]


def test_naming_needs_an_explicit_naming():
    terms = read_question("What are the names of the two children?")
    assert type_candidates("naming", "'This boy is Ignorance. This girl is Want.'", terms) == ["Ignorance", "Want"]
    assert type_candidates("naming", "Fred, Scrooge's nephew, came in.", terms) == []
    assert type_candidates("naming", 'as the "old hen," (which I am sometimes called)', terms) == ["old hen"]


def test_surname_is_the_word_after_a_given_first_name():
    terms = read_question("What is Bob's surname?")
    assert type_candidates("surname", "Bob Cratchit went down a slide on Cornhill.", terms) == ["Cratchit"]
    assert type_candidates("surname", "'Fred!' said Scrooge. Bob ran home.", terms) == []


def test_cause_candidates_need_a_stated_cause():
    terms = read_question("What did the driver's wife die of?")
    assert type_candidates("cause", "She went off in consumption.", terms) == ["consumption"]
    assert type_candidates("cause", "Marley was dead: to begin with.", terms) == []
