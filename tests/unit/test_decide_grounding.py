"""The grounding check of LLM answers: the names and numbers an answer states must be in the
excerpts it cites; the question is no support."""
from __future__ import annotations

from pagerag.generate.answer import names_in, numbers_in, ungrounded
from pagerag.records import Citation

CLERK = "'Ned had but twelve pence a week himself,' said the nephew, 'and a wife and family.'"


def cite(*quotes: str) -> list[Citation]:
    return [Citation(f"book:{i}", "book", "book.txt", 0, len(q), q, i, 1) for i, q in enumerate(quotes, 1)]


def test_a_number_the_excerpt_does_not_state_is_ungrounded():
    assert ungrounded("He earns twenty pence a week [1].", cite(CLERK)) == ["20"]
    assert ungrounded("He earns twelve pence a week [1].", cite(CLERK)) == []
    assert ungrounded("Ned earns 12 pence [1].", cite(CLERK)) == []  # digits and words are one number


def test_a_name_the_excerpt_does_not_state_is_ungrounded():
    assert ungrounded("The clerk, Ned Tolley, earns twelve pence [1].", cite(CLERK)) == ["Ned Tolley"]
    assert ungrounded("The clerk is Ned, with twelve pence [1].", cite(CLERK)) == []
    # a capitalised first word of a sentence may be an ordinary word, so it is not checked alone
    assert ungrounded("Yes. He earns twelve pence [1].", cite(CLERK)) == []


def test_any_cited_excerpt_may_support_and_citation_marks_are_not_numbers():
    assert ungrounded("Ned has twelve pence [1]; Silas dined at two [2].",
                      cite(CLERK, "Silas dined with them at two o'clock.")) == []
    assert ungrounded("Then Silas dined [1].", cite(CLERK)) == ["Silas"]
    # an opening word is a name when it stands capitalised inside a sentence elsewhere
    assert ungrounded("Silas dined [1].", cite(CLERK), question="Where did Silas dine?") == ["Silas"]
    assert ungrounded("Silas dined [1].", cite(CLERK)) == []


def test_numbers_and_names_are_read_as_written():
    assert numbers_in("twenty five men, 1,200 pounds, twenty-one ships, one dog") == ["25", "1200", "21"]
    # multiplied: "1400 pounds" is what "fourteen hundred pounds" says; a list is not one number
    assert numbers_in("fourteen hundred pounds, a hundred and forty men, three hundred and twenty guineas, "
                      "forty-two thousand dollars, two thousand three hundred and five") == ["1400", "140", "320", "42000", "2305"]
    assert numbers_in("five, ten, twenty; seven and twenty; one hundred; the old one") == ["5", "10", "20", "7", "20", "100"]
    # ordinals are numbers too, but "first" and "second" alone are not ("first name", "a second")
    assert numbers_in("the twenty-first of June, twenty first, the fourth day, his first name, a second later") == \
        ["21", "21", "4"]
    assert names_in("He met Captain Ahab in Nantucket. Nothing came of it.") == ["Captain Ahab", "Nantucket"]


def test_a_refusal_shows_enough_digits_to_tell_the_score_from_its_threshold():
    from pagerag.generate.decide import distinct

    assert distinct(0.0184, 0.0213) == ("0.018", "0.021")
    assert distinct(0.41, 0.6) == ("0.41", "0.60")
    assert distinct(0.5, 0.5)[0] == distinct(0.5, 0.5)[1]  # equal numbers stay equal (not below)
