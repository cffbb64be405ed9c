"""What a question asks for, read without an LLM: its named things, its other content words (the
asked-for attribute), and the kind of value it expects.

The features of the sentence ranker and of the sufficiency model (sentences.py, sufficiency.py)
are built from this reading; nothing here decides anything. The answer types are the textbook
wh-question classes (a sum of money, a year, a date or time, an age, a count, a place, a person or
name) read from the question word and its head noun, and their candidates are generic patterns
(a number and a currency word, a year, a month or weekday, a capitalised name): no pattern here
was written for a particular question. Which of them help was measured on the training books
(benchmarks/book_qa_results.md).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..text.names import NAME_MODIFIERS, find_names
from ..text.words import FRAME_WORDS, NUMBER_WORDS, RELATION_WORDS, STOPWORDS, WORD, stem

_NUMBER = r"(?:\d[\d,.]*|(?:%s)(?:[- ](?:%s))*)" % ("|".join(sorted(NUMBER_WORDS)), "|".join(sorted(NUMBER_WORDS)))
CURRENCY = (r"(?:pounds?|shillings?|pence|penny|pennies|guineas?|sovereigns?|crowns?|farthings?|dollars?|cents?|"
            r"francs?|marks?|florins?|ducats?|livres?|sous|roubles?|rupees?|euros?|yen|groats?|\w+pence)")
# A sum of money: a number then (at most one word, then) a currency word, or a currency sign.
MONEY = re.compile(rf"\b{_NUMBER}\s+(?:\w+\s+)?{CURRENCY}\b|[£$€]\s?\d[\d,.]*|\b\w+pence\b", re.IGNORECASE)
YEAR = re.compile(r"\b1[0-9]{3}\b|\b20[0-9]{2}\b")
NUMBER = re.compile(rf"\b{_NUMBER}\b", re.IGNORECASE)
AGE = re.compile(rf"\b{_NUMBER}\s+years?\s+(?:old|of age)\b|\baged?\s+(?:of\s+)?{_NUMBER}\b|\b{_NUMBER}-year-old\b",
                 re.IGNORECASE)
MONTHS = r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
WEEKDAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
DATE = re.compile(rf"\b{MONTHS}\b(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?(?:,?\s+1[0-9]{{3}})?|\b\d{{1,2}}(?:st|nd|rd|th)?\s+"
                  rf"(?:of\s+)?{MONTHS}\b|\b{WEEKDAYS}\b|\b1[0-9]{{3}}\b|\b{_NUMBER}\s+o'?clock\b|\b\d{{1,2}}:\d\d\b",
                  re.IGNORECASE)
# Wh-word at the head of a clause (start, or after a comma: "During the war, who led ...").
_HEAD = r"(?:^|[,;:]\s*)"


@dataclass(frozen=True)
class AnswerType:
    """The kind of value a question expects: money | year | date | age | count | place | person |
    other; `cue` is the wording that decided it."""

    name: str
    cue: str = ""

    @property
    def typed(self) -> bool:
        """A type whose candidates a sentence can be searched for."""
        return self.name != "other"


# Order matters: the first rule that matches decides (a sum before a count: "how much money").
_TYPE_RULES: list[tuple[str, re.Pattern]] = [
    ("money", re.compile(r"\bhow much (?:money|did|does|do|was|is|were|are|had|has|would|will)\b.{0,60}?\b(?:pay|paid|"
                         r"cost|charge|earn|owe|spend|spent|sell|sold|buy|bought|worth|lend|lent|give|gave|offer)"
                         r"|\bhow much money\b|\b(?:salary|wages?|price|fee|fare|rent|sum of money)\b", re.I)),
    ("year", re.compile(r"\b(?:what|which) year\b", re.I)),
    ("age", re.compile(r"\bhow old\b|\b(?:what|which) age\b", re.I)),
    ("date", re.compile(rf"{_HEAD}when\b|\b(?:what|which) (?:date|day|month|time|hour)\b", re.I)),
    ("count", re.compile(r"\bhow (?:many|much|long|far)\b|\bwhat (?:number|percentage)\b", re.I)),
    ("place", re.compile(rf"{_HEAD}where\b|\b(?:in|to|from|at|of) (?:what|which) (?:town|city|village|county|country|"
                         r"place|street|house|port|island|region|land)\b", re.I)),
    ("person", re.compile(rf"{_HEAD}who(?:m|se)?\b|\b(?:what|which) (?:is|was|are|were) (?:[\w'\u2019]+ ){{0,3}}"
                          r"(?:sur|first |last |full |christian |maiden )?names?\b|\bnames? of\b|'s name\b|"
                          r"\bwhat (?:is|was) \w+ called\b", re.I)),
]


def answer_type(question: str) -> AnswerType:
    for name, pattern in _TYPE_RULES:
        match = pattern.search(question)
        if match:
            return AnswerType(name, match.group(0).strip(" ,;:"))
    return AnswerType("other")


# --------------------------------------------------------------------------------------------
# The question


@dataclass
class QuestionTerms:
    """A question read for the features: named things, attribute words, expected answer type."""

    question: str
    names: list[str] = field(default_factory=list)  # capitalised runs: "Tiny Tim", "Marley's Ghost"
    name_tokens: list[list[str]] = field(default_factory=list)  # per name, its matchable words
    attributes: list[str] = field(default_factory=list)  # other content words, as stems
    attribute_words: list[str] = field(default_factory=list)  # the same words as written
    answer: AnswerType = AnswerType("other")
    relational: bool = False  # asks how two or more named things relate

    @property
    def all_stems(self) -> list[str]:
        named = [stem(t) for tokens in self.name_tokens for t in tokens]
        return list(dict.fromkeys(named + self.attributes))


# Words that only say which type of value is asked for ("how much", "what year"); they are not
# looked for in the evidence.
_CUE_WORDS = {stem(w) for w in ("name", "names", "called", "year", "date", "age", "much", "many", "money", "number",
                                "old", "long", "far", "time", "day")}


def read_question(question: str) -> QuestionTerms:
    tokens = [(m.group(0), m.start()) for m in WORD.finditer(question)]
    found = find_names(question)
    names = [n.text for n in found if n.words]
    name_tokens = [n.words for n in found if n.words]
    in_name = {i for i, (_, pos) in enumerate(tokens) if any(n.start <= pos < n.end for n in found)}
    attributes: list[str] = []
    attribute_words: list[str] = []
    for i, (tok, _) in enumerate(tokens):
        low = tok.lower()
        follows = tokens[i + 1][0] if i + 1 < len(tokens) else ""
        if low in NAME_MODIFIERS and follows[:1].isupper():
            continue
        if i in in_name or low in STOPWORDS or low in FRAME_WORDS or low in RELATION_WORDS or len(low) < 3:
            continue
        s = stem(tok)
        if s in _CUE_WORDS or low in NUMBER_WORDS or low.isdigit():
            continue
        if s not in attributes:
            attributes.append(s)
            attribute_words.append(low)
    relational = any(t.lower() in RELATION_WORDS for t, _ in tokens) and len(names) >= 2
    return QuestionTerms(question, names, name_tokens, attributes, attribute_words, answer_type(question), relational)


# --------------------------------------------------------------------------------------------
# Candidates of the asked type in a piece of evidence

_QUOTES = ("\"", "\u201c", "\u201d", "'", "\u2018")
MAX_NAME_WORDS = 5
_PATTERNS = {"money": MONEY, "year": YEAR, "date": DATE, "age": AGE, "count": NUMBER}


def type_candidates(kind: str, text: str, terms: QuestionTerms) -> list[tuple[int, int]]:
    """(start, end) in `text` of the strings that could answer a question of type `kind` and that
    the question does not already state (a year the question gives is not its answer)."""
    question = terms.question.lower()
    if kind in _PATTERNS:
        spans = [(m.start(), m.end()) for m in _PATTERNS[kind].finditer(text)]
    elif kind in ("person", "place"):
        # capitalised runs only: a quoted string (which find_names also reads as a name) is speech
        spans = [(n.start, n.end) for n in find_names(text)
                 if n.words and text[max(0, n.start - 1): n.start] not in _QUOTES and len(n.words) <= MAX_NAME_WORDS]
    else:
        return []
    return [(s, e) for s, e in spans if text[s:e].strip() and text[s:e].lower() not in question]


def typed_span(kind: str, text: str, terms: QuestionTerms) -> tuple[int, int] | None:
    """The shortest candidate of the asked type in `text` (first of equals), or None."""
    spans = type_candidates(kind, text, terms)
    return min(spans, key=lambda se: (se[1] - se[0], se[0])) if spans else None
