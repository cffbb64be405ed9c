"""The fuzzy linker's closest_word gives difflib.get_close_matches' answer, only faster."""
from __future__ import annotations

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

from pagerag.retrieve.linking import closest_word
from pagerag.retrieve.state import WordBlock

LETTERS = "abcdeilmnorstu'é"
word = st.text(LETTERS, min_size=1, max_size=12)


def _difflib(query: str, words: list[str], cutoff: float) -> str | None:
    found = difflib.get_close_matches(query, words, n=1, cutoff=cutoff)
    return found[0] if found else None


@settings(max_examples=300, deadline=None)
@given(query=word, words=st.lists(word, max_size=40), cutoff=st.sampled_from([0.5, 0.7, 0.88, 1.0]))
def test_the_same_word_as_difflib(query, words, cutoff):
    assert closest_word(query, WordBlock.of(words), cutoff) == _difflib(query, words, cutoff)


def test_ties_go_to_the_word_difflib_picks_and_letters_outside_the_block_count_for_nothing():
    words = ["marlex", "marley", "marlez", "scrooge"]
    assert closest_word("marleq", WordBlock.of(words), 0.8) == _difflib("marleq", words, 0.8) == "marlez"
    assert closest_word("zzzzzz", WordBlock.of(words), 0.5) is None
    assert closest_word("marley", WordBlock.of([]), 0.5) is None
