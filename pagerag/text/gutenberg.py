"""Find the body of a Project Gutenberg text without copying it.

Gutenberg files wrap the book in a header (title page, licence summary, "*** START OF ... ***")
and a footer ("*** END OF ... ***" or "End of the Project Gutenberg EBook of ...", then the full
licence). We only return offsets: the body is `text[start:end]`, so every later offset still
points into the file as loaded. Files without markers are returned whole (minus outer
whitespace). Some corpora (GraphRAG-Bench) flatten whole books onto one line, so markers are
found anywhere, not only at line starts.
"""
from __future__ import annotations

import re

# Each pattern begins with a literal ("***", "*END*", "End"/"END") so `re` can scan for it at C
# speed; a leading assertion or a global IGNORECASE makes the search ~50x slower on a whole book.
# Ends of headers: the body starts after the match.
_START_MARKERS = (
    re.compile(r"\*\*\*\s*(?i:START\s+OF\s+(?:THE|THIS)\s+PROJECT\s+GUTENBERG)[^*\n]*\*\*\*"),
    re.compile(r"\*END\*\s*(?i:THE\s+SMALL\s+PRINT!)[^\n]*?\*END\*"),
)

# Starts of footers: the body ends before the match.
_END_MARKERS = (
    re.compile(r"\*\*\*\s*(?i:END\s+OF\s+(?:THE|THIS)\s+PROJECT\s+GUTENBERG)[^*\n]*\*\*\*"),
    re.compile(r"(?:End|END)\s+(?:of|OF)\s+(?i:the\s+)?(?i:Project\s+Gutenberg)"),
)
# "End of ..." must begin the text or a line, or follow whitespace or closing punctuation, so a
# sentence quoting the marker (`"End of The Project Gutenberg Etext..."`) is not taken for one.
_MAY_PRECEDE_END = frozenset(" \t\n.!?])")

# A producer credit paragraph that often follows the START marker ("Produced by ... Team at
# http://www.pgdp.net"). Only stripped when a blank line ends it, so we never eat the book.
_CREDIT = re.compile(
    r"(?:Produced|E-text\s+prepared|Transcribed)\s+(?:by|from)\b[^\n]*(?:\n[^\n]+){0,4}?\n[ \t]*\n",
    re.IGNORECASE,
)
_CREDIT_MAX_CHARS = 600
_SPACES = re.compile(r"\s*")


def find_body(text: str) -> tuple[int, int]:
    """(start, end) of the book inside `text`, without Gutenberg header, footer or outer spaces."""
    start, end = 0, len(text)
    start_match = _first_match(text, _START_MARKERS, 0)
    if start_match:
        start = start_match.end()
    end_match = _first_match(text, _END_MARKERS, start)
    if end_match:
        end = end_match.start()
    start = _skip_whitespace(text, start, end)
    if start_match:
        start = _skip_credit(text, start, end)
    return start, _trim_end(text, start, end)


def _first_match(text: str, patterns: tuple[re.Pattern[str], ...], pos: int) -> re.Match[str] | None:
    """The earliest match of any pattern at or after `pos`."""
    found = [m for m in (_first_valid(text, p, pos) for p in patterns) if m]
    return min(found, key=lambda m: m.start(), default=None)


def _first_valid(text: str, pattern: re.Pattern[str], pos: int) -> re.Match[str] | None:
    for match in pattern.finditer(text, pos):
        at = match.start()
        if text[at] != "E" or at == 0 or text[at - 1] in _MAY_PRECEDE_END:
            return match
    return None


def _skip_credit(text: str, start: int, end: int) -> int:
    credit = _CREDIT.match(text, start, min(end, start + _CREDIT_MAX_CHARS))
    if credit is None:
        return start
    after = _skip_whitespace(text, credit.end(), end)
    return after if after < end else start  # never strip the whole body


def _skip_whitespace(text: str, pos: int, end: int) -> int:
    return _SPACES.match(text, pos, end).end()


def _trim_end(text: str, start: int, end: int) -> int:
    while end > start and text[end - 1].isspace():
        end -= 1
    return end
