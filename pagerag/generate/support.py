"""Does one place in the evidence support an answer? The no-LLM sufficiency rule, also used by
the extractive answerer to pick the sentence it quotes.

The rule, applied to every sentence s of every evidence span, with W = s and its neighbours:
  1. entities: one of the question's named things (capitalised runs, matched by any of their
     words) occurs in the evidence span that holds s, when the question names any;
  2. attribute: the question's other content words — what it asks about ("salary", "born",
     "bed-curtains") — cover at least `generate.heuristic_coverage` of their IDF weight in that
     span, and one of them is in W. A relational question ("how is Fred related to Fan?")
     states its relation in other words, so there two of its names must share W instead;
  3. answer type: when the question asks for a checkable type (a sum of money, a year, a date,
     an age, a count, a cause of death, an explicit naming or a surname), s holds a candidate
     of that type that the question does not state itself, and W holds one of the attribute
     words (the sum must sit next to "paid", not merely near the payer's name).
Sufficient when some sentence passes all three. A typical unanswerable book question names
real people and a real attribute but asks for a value the book never gives ("What was Fred's
surname?", "How much did Joe pay the charwoman?"), which rule 3 catches; rule 2 catches
questions about things the book never discusses (its publisher, a film adaptation).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..records import Window
from ..text.words import stems_of
from .question import QuestionTerms, type_candidates

ATTRIBUTE_COVERAGE = 0.2  # default of generate.heuristic_coverage
TYPE_WORDS = {
    "money": "sum of money", "year": "year", "date": "date", "age": "age", "number": "number",
    "naming": "name", "surname": "surname", "cause": "cause",
}


@dataclass
class SentenceSupport:
    window: Window
    start: int  # the sentence s (absolute offsets)
    end: int
    names_found: list[str]
    attribute_coverage: float
    candidates: list[str]
    type_ok: bool
    passes: bool
    score: float


@dataclass
class Support:
    sufficient: bool
    best: SentenceSupport | None
    missing: str
    score: float
    ranked: list[SentenceSupport] = field(default_factory=list)
    answer_type: str = ""  # the checkable type asked for, "" when none
    type_found: bool | None = None  # some sentence holds a candidate of it (None: not checkable)


def _name_found(tokens: list[str], text: str) -> bool:
    return any(re.search(rf"(?<![A-Za-z]){re.escape(t)}(?![a-z])", text) for t in tokens)


def _attribute_coverage(terms: QuestionTerms, present: set[str], idf: Callable[[str], float]) -> tuple[float, int]:
    if not terms.attributes:
        return 1.0, 1
    total = sum(idf(a) for a in terms.attributes) or 1.0
    found = [a for a in terms.attributes if a in present]
    return sum(idf(a) for a in found) / total, len(found)


def assess(terms: QuestionTerms, windows: Sequence[Window], evidence_texts: dict[str, str],
           idf: Callable[[str], float], coverage_threshold: float = ATTRIBUTE_COVERAGE) -> Support:
    """Apply the rule to every sentence of the evidence (`evidence_texts`: passage id -> the
    evidence span's text); the best-ranked sentence decides."""
    kind = terms.answer.name if terms.answer.checkable else ""
    results: list[SentenceSupport] = []
    seen: set[tuple[int, int]] = set()
    span_cache: dict[str, tuple[list[str], float]] = {}
    for w in windows:
        if w.passage_id not in span_cache:
            span_text = evidence_texts[w.passage_id]
            names = [n for n, t in zip(terms.names, terms.name_tokens) if _name_found(t, span_text)]
            span_cache[w.passage_id] = (names, _attribute_coverage(terms, stems_of(span_text), idf)[0])
        names, span_coverage = span_cache[w.passage_id]
        names_ok = bool(names) or not terms.name_tokens
        for i, (s, e) in enumerate(w.sentences):
            if (s, e) in seen:
                continue
            seen.add((s, e))
            around = _slice(w, w.sentences[max(0, i - 1)][0], w.sentences[min(len(w.sentences) - 1, i + 1)][1])
            in_window = [a for a in terms.attributes if a in stems_of(around)]
            if terms.relational:
                attribute_ok = sum(_name_found(t, around) for t in terms.name_tokens) >= 2
            else:
                attribute_ok = span_coverage >= coverage_threshold and (bool(in_window) or not terms.attributes)
            candidates = type_candidates(kind, _slice(w, s, e), terms) if kind else []
            type_ok = not kind or (bool(candidates) and (bool(in_window) or not terms.attributes))
            passes = names_ok and attribute_ok and type_ok
            # rank: the sentence's own words first, then its window, names and a typed candidate
            sentence_coverage = _attribute_coverage(terms, stems_of(_slice(w, s, e)), idf)[0]
            window_coverage = _attribute_coverage(terms, stems_of(around), idf)[0]
            score = (sentence_coverage + 0.5 * window_coverage + 0.5 * len(names) / max(1, len(terms.names))
                     + (0.5 if candidates else 0.0))
            results.append(SentenceSupport(w, s, e, names, round(span_coverage, 4), candidates, type_ok, passes,
                                           round(score, 4)))
    results.sort(key=lambda r: (not r.passes, -r.score))
    best = results[0] if results else None
    sufficient = bool(best and best.passes)
    missing = "" if sufficient else explain_missing(terms, results, coverage_threshold)
    return Support(sufficient, best, missing, best.score if best else 0.0,
                   results, kind, any(r.type_ok for r in results) if kind else None)


def _slice(w: Window, start: int, end: int) -> str:
    """Text of [start, end) inside window w (its own text covers the whole window)."""
    return w.text[max(0, start - w.start): max(0, end - w.start)]


def explain_missing(terms: QuestionTerms, results: list[SentenceSupport], threshold: float = ATTRIBUTE_COVERAGE) -> str:
    """One sentence naming what the evidence lacks."""
    if not results:
        return "no evidence was retrieved"
    names = list(terms.names)
    found_names = {n for r in results for n in r.names_found}
    absent = [n for n in names if n not in found_names]
    about = ", ".join(names) if names else "the question's subject"
    kind = terms.answer.name if terms.answer.checkable else ""
    best_cov = max(r.attribute_coverage for r in results)
    if names and not found_names:
        return f"the evidence does not mention {', '.join(absent)}"
    if best_cov < threshold:
        words = ", ".join(f"'{a}'" for a in terms.attribute_words[:4])
        return f"the evidence about {about} says nothing about {words}"
    if kind:
        return f"the evidence about {about} never states the {TYPE_WORDS.get(kind, kind)} asked for"
    return f"no single passage about {about} answers the question"
