"""Masked negatives: hide the passages that hold a question's evidence, so the book (as the
retriever sees it) no longer answers the question.

The mask of a question is
  1. every passage that locates any of its evidence statements (the >= 60% rule; this includes
     near duplicates anywhere in the book),
  2. for a statement of NEAR_MIN_WORDS or more content words, every passage holding NEAR_COVERAGE
     of them: a hand check of 40 masked questions (training books) found the fact restated
     elsewhere in other words ("she abruptly faced him", "putting the air in motion") just
     under the 60% line,
  3. the passages overlapping an evidence passage (chunks overlap, so a neighbour may hold the
     part of a sentence that straddles the boundary),
  4. every passage that states the gold answer (its string, or >= 60% of its content words)
     together with one of the question's distinctive names.
A question is used only when every statement is located (otherwise the unlocated part may still
be in the book) and the mask stays small (MAX_MASK passages: a mask that hides a sizeable part
of the book is a different question, not a missing detail).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ..evaluate.scoring import content_words
from .locate import BookIndex, Location, answer_is_stated, answer_score

MAX_MASK = 24  # passages
NEAR_COVERAGE = 0.5
NEAR_MIN_WORDS = 4  # below this, half the words is one or two common ones
UBIQUITOUS_NAME = 0.05  # a name in more than this share of passages does not tie an answer to a question
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z\u00c0-\u017f'\u2019-]+")
_POSSESSIVE = re.compile(r"(?:['\u2019]s|['\u2019])$")
# Capitalised words of a question that are not names of what it is about.
_NOT_NAMES = frozenset("""a an the in on at of to for from by with as and or but if is are was were be been do does
did has have had how what which who whom whose why when where whereas while within without according after
before during given considering based describe explain imagine write rewrite compose discuss summarize
summarise identify list name tell compare throughout across between among upon into over under this that
these those there their his her its it he she they we you your i my our mr mrs ms miss dr st capt gen col lt
sir lord lady rev prof mme mlle mount saint""".split())


@dataclass
class Mask:
    rows: set[int]
    reasons: dict[str, int]  # how many rows each rule added (located, overlap, answer)


def capitalised_words(text: str) -> list[str]:
    """Capitalised words in order, possessive 's and trailing apostrophes dropped."""
    return [_POSSESSIVE.sub("", w) for w in _CAPITALISED.findall(text)]


def question_names(question: str) -> list[str]:
    """Capitalised words of the question that may name what it is about (deduplicated)."""
    words = capitalised_words(question)
    return list(dict.fromkeys(w for w in words if len(w) > 2 and w.lower() not in _NOT_NAMES))


class NameIndex:
    """Which passages contain a name (whole word, case-sensitive), and how common names are."""

    def __init__(self, index: BookIndex):
        self.index = index
        self.df: Counter[str] = Counter()
        self.caps: list[frozenset[str]] = []
        for p in index.passages:
            caps = frozenset(capitalised_words(p.text))
            self.caps.append(caps)
            self.df.update(caps)

    def distinctive(self, names: list[str]) -> list[str]:
        limit = UBIQUITOUS_NAME * max(len(self.index.passages), 1)
        return [n for n in names if 0 < self.df[n] <= limit]

    def has_any(self, row: int, names: list[str]) -> bool:
        return any(n in self.caps[row] for n in names)


def mask_for(index: BookIndex, names: NameIndex, question: str, answer: str,
             locations: list[Location], statement_words: list[frozenset[str]]) -> Mask:
    """The passages to hide for a masked negative of this question (see the module doc)."""
    rows: set[int] = set()
    reasons = {"located": 0, "near": 0, "overlap": 0, "answer": 0}
    for loc in locations:
        _add(rows, loc.passing, reasons, "located")
    for words in statement_words:
        if len(words) >= NEAR_MIN_WORDS:
            _add(rows, index.covering(words, NEAR_COVERAGE), reasons, "near")
    for loc in locations:
        _add(rows, [n for r in loc.best for n in index.overlapping(r)], reasons, "overlap")
    if answer_is_stated(answer):
        distinctive = names.distinctive(question_names(question))
        words = content_words(answer)
        if distinctive:
            stating = [r for r in candidate_rows(index, words)
                       if names.has_any(r, distinctive) and answer_score(answer, words, index.passages[r].text) is not None]
            _add(rows, stating, reasons, "answer")
    return Mask(rows, reasons)


def candidate_rows(index: BookIndex, words: frozenset[str]) -> list[int]:
    """Rows holding at least one content word of the answer (the only ones that can state it)."""
    return sorted({r for w in words for r in index.rows_with.get(w, ())})


def _add(rows: set[int], new, reasons: dict[str, int], why: str) -> None:
    for r in new:
        if r not in rows:
            rows.add(r)
            reasons[why] += 1


def unmasked_locating(index: BookIndex, statement_words: list[frozenset[str]], rows: set[int]) -> list[int]:
    """Passages outside the mask that still locate some statement (empty for a valid mask)."""
    return sorted({r for words in statement_words for r in index.located_anywhere(words, rows)})


def usable(locations: list[Location], mask: Mask) -> str | None:
    """None when the question makes a masked negative, else why not."""
    if not locations or not all(loc.best for loc in locations):
        return "evidence not located"
    if len(mask.rows) > MAX_MASK:
        return "mask too large"
    return None

