"""What a question asks for, read without an LLM: its named things, its other content words (the
asked-for attribute), and the type of answer it expects.

Used by the no-LLM sufficiency heuristic (support.py) and the extractive answerer: both look for
one evidence window that holds the question's names, most of its attribute words, and a
candidate of the expected answer type (a sum of money for "how much did X pay", a year for "in
what year", an explicit naming for "what was the name of"). Plain regular expressions and a
small suffix stemmer: no model to load, so the offline path stays fast.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..text.names import NAME_MODIFIERS, find_names
from ..text.words import FRAME_WORDS, NUMBER_WORDS, RELATION_WORDS, STOPWORDS, WORD, stem, stems_of, words

_NUMBER = r"(?:\d[\d,.]*|(?:%s)(?:[- ](?:%s))*)" % ("|".join(sorted(NUMBER_WORDS)), "|".join(sorted(NUMBER_WORDS)))
CURRENCY = (r"(?:pounds?|shillings?|pence|penny|pennies|guineas?|sovereigns?|crowns?|farthings?|dollars?|"
            r"francs?|marks?|groats?|quid|bob)")
# A sum of money: a number then a currency word, "£5", or a coin that names its own value.
MONEY = re.compile(
    rf"\b{_NUMBER}\s+(?:\w+\s+)?{CURRENCY}\b|£\s?\d|\b\d+\s?[sd]\.|\b(?:sixpence|threepence|twopence|fourpence|"
    rf"half-a-crown|half a crown|half-a-guinea|half a sovereign)\b",
    re.IGNORECASE,
)
YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b|\bin the year\b", re.IGNORECASE)
NUMBER = re.compile(rf"\b{_NUMBER}\b", re.IGNORECASE)
AGE = re.compile(rf"\b{_NUMBER}\s+years?\s+(?:old|of age)\b|\baged?\s+(?:of\s+)?{_NUMBER}\b|\b{_NUMBER}-year-old\b",
                 re.IGNORECASE)
MONTHS = r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
DATE = re.compile(rf"\b{MONTHS}\b[^.;]{{0,12}}\d|\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{MONTHS}\b|\b1[0-9]{{3}}\b",
                  re.IGNORECASE)
# An explicit naming: "named X", "called X", "his name was X", "this boy is Ignorance".
NAMING = re.compile(
    r"\b(?:named|called|christened|surnamed|(?:name|names|surname)\s+(?:is|was|are|were|of)|by name|whose name"
    r"|(?i:this|that|the)\s+\w+\s+(?:is|was))\s+['\"\u2018\u201c_]*(?:Mr\.?\s+|Mrs\.?\s+|Miss\s+)?"
    r"([A-Z][a-z\u00c0-\u024f]+(?:\s+[A-Z][a-z\u00c0-\u024f]+)*)",
)

# A stated cause: "went off in consumption", "died of a fever", "killed by", "because of".
CAUSE = re.compile(
    r"\b(?:died|dies|die|dying|dead|death|perished|killed|went off|carried off|taken off)\b[^.;:]{0,12}?\b(?:of|from|in|by|with)"
    r"\s+(?:a |an |the |his |her )?([a-z]+(?: [a-z]+)?)|\b(?:caused by|because of|owing to|due to|from the effects of)\s+([a-z]+(?: [a-z]+)?)",
    re.IGNORECASE,
)
CALLED = re.compile(r"\b(called|named|nicknamed|known as|styled)\b", re.IGNORECASE)
QUOTED = re.compile(r"[\"\u201c]([^\"\u201d]{2,40}?)[,.!?]?[\"\u201d]")


@dataclass(frozen=True)
class AnswerType:
    """The kind of answer a question expects. `name` is one of money | year | date | age | number
    | naming | surname | place | person | other; `cue` is the wording that decided it."""

    name: str
    cue: str = ""

    @property
    def checkable(self) -> bool:
        """Types a window can be checked for without understanding it."""
        return self.name in {"money", "year", "date", "age", "number", "naming", "surname", "cause"}


# Order matters: the first rule that matches decides.
_TYPE_RULES: list[tuple[str, re.Pattern]] = [
    ("surname", re.compile(r"\b(surname|last name|family name|maiden name|maiden surname)\b", re.I)),
    ("naming", re.compile(r"\b(first names?|christian names?|(?:the |their |his |her |its )?names? of|what (?:is|was|are|were) "
                          r"(?:the |his |her |their )?names?|what (?:was|is) \w+(?:'s)? name|named|called)\b", re.I)),
    ("cause", re.compile(r"\b(die|died|dies) (of|from)\b|\bcause of (his |her |their )?death\b|\bwhat (killed|caused)\b", re.I)),
    ("year", re.compile(r"\b(in|by|from|until|since)? ?(what|which) year\b|\bwhat year\b|\bwhen was .* (born|built|founded)\b", re.I)),
    ("date", re.compile(r"\b(on )?what (date|day of the month)\b", re.I)),
    ("age", re.compile(r"\bhow old\b|\b(what|exact) age\b|\bage of\b", re.I)),
    ("money", re.compile(r"\bhow much (money|did .* (pay|charge|cost|earn|give|promise|spend|owe|lend|sell|buy|offer)|"
                         r"does .* (pay|charge|cost|earn|give|owe))|\b(salary|wages?|price|fee|fare|rent|sum of money)\b|"
                         r"\bhow much (is|was|does|did) .* (cost|worth)\b", re.I)),
    ("number", re.compile(r"\bhow (many|much|long|late|often|far|tall|high|deep|wide)\b|\bwhat (number|percentage)\b", re.I)),
    ("place", re.compile(r"^\s*where\b|\b(in|to|from|at) (what|which) (town|city|village|county|country|part|place|street|"
                         r"house|inn|hotel|school|port|island|parish)\b|\bwhich (town|city|village|county|country)\b", re.I)),
    ("person", re.compile(r"^\s*who(m)?\b|\bwhich (actor|man|woman|person|author|writer|painter|king|queen)\b", re.I)),
]


def answer_type(question: str) -> AnswerType:
    for name, pattern in _TYPE_RULES:
        match = pattern.search(question)
        if match:
            return AnswerType(name, match.group(0).strip())
    return AnswerType("other")


# --------------------------------------------------------------------------------------------
# The question


@dataclass
class QuestionTerms:
    """A question read for the heuristic: named things, attribute words, expected answer type."""

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


def read_question(question: str) -> QuestionTerms:
    tokens = [(m.group(0), m.start()) for m in WORD.finditer(question)]
    found = find_names(question)
    names = [n.text for n in found if n.words]
    name_tokens = [n.words for n in found if n.words]
    in_name = {i for i, (_, pos) in enumerate(tokens) if any(n.start <= pos < n.end for n in found)}
    cue = answer_type(question)
    cue_words = {stem(w) for w in ("name", "names", "surname", "year", "date", "age", "much", "many", "money", "number", "old")}
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
        if s in cue_words or low in NUMBER_WORDS or low.isdigit():
            continue
        if s not in attributes:
            attributes.append(s)
            attribute_words.append(low)
    relational = any(t.lower() in RELATION_WORDS for t, _ in tokens) and len(names) >= 2
    return QuestionTerms(question, names, name_tokens, attributes, attribute_words, cue, relational)


# --------------------------------------------------------------------------------------------
# Answer-type candidates in a piece of evidence


def type_candidates(kind: str, text: str, terms: QuestionTerms) -> list[str]:
    """Strings in `text` that could answer a question of type `kind` and that the question does
    not already contain (a year the question states is not an answer to it)."""
    question = terms.question.lower()
    if kind == "money":
        found = [m.group(0) for m in MONEY.finditer(text)]
    elif kind == "year":
        found = [m.group(0) for m in YEAR.finditer(text)]
    elif kind == "date":
        found = [m.group(0) for m in DATE.finditer(text)]
    elif kind == "age":
        found = [m.group(0) for m in AGE.finditer(text)]
    elif kind == "number":
        found = [m.group(0) for m in NUMBER.finditer(text)]
    elif kind == "naming":
        found = [m.group(1) for m in NAMING.finditer(text)]
        if CALLED.search(text):  # "as the 'old hen' (which I am sometimes called)"
            found += [m.group(1) for m in QUOTED.finditer(text)]
    elif kind == "cause":
        found = [m.group(1) or m.group(2) for m in CAUSE.finditer(text)]
        found = [f for f in found if f.split()[0].lower() not in STOPWORDS | NUMBER_WORDS]
    elif kind == "surname":
        found = _surnames(text, terms)
    else:
        return []
    return [f for f in found if f.lower() not in question and f.strip()]


def _surnames(text: str, terms: QuestionTerms) -> list[str]:
    """A surname is the capitalised word right after a first name the question gives (or an
    explicit "surname ... X")."""
    out = [m.group(1) for m in NAMING.finditer(text) if "surname" in m.group(0).lower()]
    for tokens in terms.name_tokens:
        first = tokens[0]
        for m in re.finditer(rf"\b{re.escape(first)}\s+([A-Z][a-z\u00c0-\u024f]+)", text):
            if m.group(1).lower() not in STOPWORDS:
                out.append(m.group(1))
    return out
