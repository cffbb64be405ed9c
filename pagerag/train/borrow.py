"""Borrowed negatives: a question about one character of another training book, asked about a
character of this book, kept only where this book does not support it.

Masked and swapped negatives keep the question's topic, which the book still talks about; the
unanswerable questions users ask are different: a real character of the book and a detail the
book never gives ("what was the name of X's mother?"), so retrieval finds many passages about the
character and none that states the detail. A borrowed negative is made that way:
  - the source is an answerable Fact Retrieval or Complex Reasoning question of a *training* book
    (never a test book) about one character (swap.main_character); it must be portable: once the
    character's name is taken out, no capitalised word is left (no other person, place or title of
    its book) and it has at most MAX_CONTENT_WORDS content words (GraphRAG-Bench questions are long;
    a longer one is about a scene of its own book more than about a detail of the character). Only
    ~70 of the training books' 1,219 such questions are portable, so each is asked in several books;
  - the new character is one of this book's MAX_CAST most mentioned characters (the ones users
    ask about), of no other sex by title than the source character's or the question's pronouns
    ("his darkest hour" is not asked about a Mrs.);
  - it is kept only when, among this book's passages naming the new character, none locates the
    altered question (>= 60% of its content words, the new name's words included, so one passage
    with the name and half of the detail rejects it) and no sentence holds the source's answer.
Each book gets at most PER_BOOK of them, sources drawn in a seeded order from the other books.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

from ..evaluate.scoring import content_words, located
from .examples import CorpusExample, Swap
from .mask import capitalised_words
from .swap import LEADING_WORDS, Character, Swapper, gender, occurrences, replace_character

MAX_CONTENT_WORDS = 12
SOURCE_TYPES = ("Fact Retrieval", "Complex Reasoning")
MAX_CAST = 20
PER_BOOK = 30
TRIES = 4  # new characters tried per source question


@dataclass(frozen=True)
class Portable:
    """A source question that can be asked about another character."""

    book: str
    qid: str
    question: str
    answer: str
    question_type: str
    character: Character


def portable_questions(book: str, questions: list[dict], swapper: Swapper) -> list[Portable]:
    """The book's questions (SOURCE_TYPES) that ask about one character and nothing else of it."""
    out = []
    for q in questions:
        if q.get("question_type") not in SOURCE_TYPES:
            continue
        evidence = [s for s in q.get("evidence") or [] if s.strip()]
        found = swapper.main_character_of(q["question"], evidence)
        if found is None:
            continue
        c, _ = found
        rest = replace_character(q["question"], c.words, "\u0000")
        others = [w for w in capitalised_words(rest) if w.lower() not in LEADING_WORDS]
        if others or len(content_words(rest)) > MAX_CONTENT_WORDS or "\u0000" not in rest:
            continue
        out.append(Portable(book, q["id"], q["question"], q["answer"], q["question_type"], c))
    return out


def borrowed_examples(book: str, split: str, swapper: Swapper, sources: list[Portable], seed: int) -> tuple[list[CorpusExample], dict]:
    """Up to PER_BOOK borrowed negatives for `book` from `sources` (other books' questions)."""
    cast = swapper.cast[:MAX_CAST]
    pool = [p for p in sources if p.book != book]
    rng = random.Random(f"{seed}:borrow:{book}")
    rng.shuffle(pool)
    made: list[CorpusExample] = []
    rejected: dict[str, int] = {}
    for p in pool:
        if len(made) >= PER_BOOK:
            break
        result = borrow_one(p, cast, swapper, rng)
        if isinstance(result, str):
            rejected[result] = rejected.get(result, 0) + 1
            continue
        new, question = result
        made.append(CorpusExample(
            id=f"{book}:{p.qid}:borrowed", book=book, split=split, kind="borrowed", question=question, answer=p.answer,
            question_type=p.question_type, source_id=p.qid, evidence=[], evidence_passage_ids=[], evidence_coverage=[],
            swap=Swap(p.character.name, new.name, f"{p.book}:{p.character.entity_id}", new.entity_id)))
    return made, rejected


_HE = re.compile(r"\b(?:he|him|his|himself)\b", re.IGNORECASE)
_SHE = re.compile(r"\b(?:she|her|hers|herself)\b", re.IGNORECASE)


def pronoun_gender(question: str) -> str:
    """"m" or "f" when the question's pronouns give the character's sex, else ""."""
    he, she = bool(_HE.search(question)), bool(_SHE.search(question))
    return "m" if he and not she else "f" if she and not he else ""


def borrow_one(p: Portable, cast: list[Character], swapper: Swapper, rng: random.Random) -> tuple[Character, str] | str:
    """(new character, altered question), or why there is none."""
    asked = {gender(p.character), pronoun_gender(p.question)} - {""}
    fits = [c for c in cast if not ({gender(c)} | asked) >= {"f", "m"}]
    reason = "no character"
    for new in rng.sample(fits, min(TRIES, len(fits))):
        question = replace_character(p.question, p.character.words, new.name)
        reason = unsupported_reason(new, question, p.answer, swapper)
        if reason is None:
            return new, question
    return reason


def unsupported_reason(new: Character, question: str, answer: str, swapper: Swapper) -> str | None:
    """None when the book does not support the altered question, else why it might."""
    if not occurrences(new.name, question):
        return "incomplete swap"
    rows = swapper.rows_naming(new)
    words = content_words(question)
    if any(located(words, swapper.index.words[r]) for r in rows):
        return "book supports it"
    return "answer beside new name" if swapper.answer_beside(new, answer) else None
