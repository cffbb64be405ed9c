"""Fast rule-based sentence spans with absolute character offsets.

A full parser is far too slow for a whole book at build time (spaCy reads ~5k words/s); these
rules are what a chunker needs: never cut inside "Mr. Smith", keep a closing quote with its
sentence, and treat a blank line as a hard break. Spans never start or end with whitespace, and
together they cover every non-whitespace character of the region.
"""
from __future__ import annotations

import re

# A blank line (possibly holding spaces) separates paragraphs.
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\f\v]*\n\s*")

# Sentence end: terminal punctuation, any closing quotes/brackets/emphasis marks, then whitespace
# and something that can start a sentence (capital, digit, opening quote or bracket).
_SENTENCE_END = re.compile(
    r"""(?:[.!?]+|\u2026)['"\u2019\u201d)\]_*]*(?=\s+['"\u2018\u201c(\[_*]*[A-Z0-9\u00c0-\u00de])"""
)

_WORD_BEFORE = re.compile(r"([A-Za-z]+)\.?$")
_ABBREVIATIONS = frozenset(
    """mr mrs ms messrs mme mlle dr st prof rev revd hon capt col gen lt sgt maj cmdr adm gov sen rep
    jr sr esq mt ft no nos vol vols ch chap p pp fig figs ed eds etc viz vs cf al ca approx dept
    co corp inc ltd bros jan feb mar apr jun jul aug sep sept oct nov dec
    e g i ie eg""".split()
)


def split_sentences(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Sentence spans (absolute offsets) inside text[start:end], in order."""
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    for para_start, para_end in _paragraphs(text, start, end):
        spans.extend(_sentences_in(text, para_start, para_end))
    return spans


def _paragraphs(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans = []
    pos = start
    for brk in _PARAGRAPH_BREAK.finditer(text, start, end):
        spans.append((pos, brk.start()))
        pos = brk.end()
    spans.append((pos, end))
    return spans


def _sentences_in(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans = []
    pos = start
    for match in _SENTENCE_END.finditer(text, start, end):
        if _is_abbreviation(text, start, match):
            continue
        spans.append((pos, match.end()))
        pos = match.end()
    spans.append((pos, end))
    return [trimmed for s, e in spans if (trimmed := trim_span(text, s, e))]


def _is_abbreviation(text: str, para_start: int, match: re.Match[str]) -> bool:
    """True when the '.' ends an abbreviation or an initial ("Mr.", "e.g.", "H. G. Wells")."""
    if text[match.start()] != "." or match.end() - match.start() != 1:
        return False  # "!", "?", "...", or a period followed by a closing quote ends a sentence
    word = _WORD_BEFORE.search(text, max(para_start, match.start() - 12), match.start())
    if word is None:
        return False
    token = word.group(1)
    if word.start() > para_start and text[word.start() - 1].isalpha():
        return False  # the search window cut a longer word
    if len(token) == 1 and token.isupper():
        return token != "I"  # an initial; "I." mostly ends a sentence ("...than I.")
    return token.lower() in _ABBREVIATIONS


def trim_span(text: str, start: int, end: int) -> tuple[int, int] | None:
    """[start, end) without whitespace at either end; None when nothing is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def cut_windows(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """Windows of whole consecutive sentences inside text[start:end]: (start, end, sentences),
    each at most `max_chars` long where a sentence allows, together covering the region;
    consecutive windows overlap by one sentence when a window holds several."""
    sentences = split_sentences(text, start, end)
    if not sentences:
        return [(start, end, [(start, end)])]
    windows: list[tuple[int, int, list[tuple[int, int]]]] = []
    i = 0
    while i < len(sentences):
        j = i
        while j + 1 < len(sentences) and sentences[j + 1][1] - sentences[i][0] <= max_chars:
            j += 1
        windows.append((sentences[i][0], sentences[j][1], sentences[i : j + 1]))
        if j + 1 >= len(sentences):
            break
        i = j if j > i else j + 1  # overlap by one sentence when the window holds several
    return windows
