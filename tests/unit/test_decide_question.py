"""Reading a question without an LLM: its names and its attribute words."""
from __future__ import annotations

from pagerag.generate.question import read_question
from pagerag.text.words import stem


def test_names_and_attributes_are_separated():
    terms = read_question("How much money did Josiah pay the ferryman for the lanterns and ropes?")
    assert terms.names == ["Josiah"]
    # "money"/"much" only say what kind of value is asked
    assert terms.attribute_words == ["pay", "ferryman", "lanterns", "ropes"]
    assert terms.attributes == [stem(w) for w in terms.attribute_words]


def test_a_lower_case_word_before_a_name_is_an_attribute_word():
    assert read_question("What did young Josiah sell at the fair?").attribute_words == ["young", "sell", "fair"]


def test_names_stop_at_punctuation_and_drop_possessives():
    terms = read_question("Hobbs turns a pedlar away on Midsummer Eve. What does Hobbs want?")
    assert "Midsummer Eve" in terms.names
    assert all("What" not in name for name in terms.names)
    assert read_question("What is Nora Pettigrew's trade?").names == ["Nora Pettigrew"]


def test_relational_questions_are_flagged():
    assert read_question("How is the vicar's nephew Tom connected to his sister Ann?").relational
    assert not read_question("What is Tom's surname?").relational


def test_stemmer_matches_inflections():
    assert stem("brothers") == stem("brother")
    assert stem("charged") == stem("charge") == stem("charges")
    assert stem("paid") == stem("pays")
