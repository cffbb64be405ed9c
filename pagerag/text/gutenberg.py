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

# Ends of headers; the body starts after the match.
_START_MARKERS = re.compile(
    r"\*{3}\s*START\s+OF\s+(?:THE|THIS)\s+PROJECT\s+GUTENBERG[^*\n]*\*{3}"
    r"|\*END\*\s*THE\s+SMALL\s+PRINT![^\n]*?\*END\*",
    re.IGNORECASE,
)

# Starts of footers; the body ends before the match. "End of ..." must begin a line or follow
# whitespace/closing punctuation, so a sentence *quoting* the marker (e.g. `"End of The Project
# Gutenberg Etext..."`) is not taken for one.
_END_MARKERS = re.compile(
    r"\*{3}\s*END\s+OF\s+(?:THE|THIS)\s+PROJECT\s+GUTENBERG[^*\n]*\*{3}"
    r"|(?:^|(?<=[\s.!?\])]))(?-i:End|END)\s+of\s+(?:the\s+)?Project\s+Gutenberg",
    re.IGNORECASE | re.MULTILINE,
)

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
    start_match = _START_MARKERS.search(text)
    if start_match:
        start = start_match.end()
    end_match = _END_MARKERS.search(text, start)
    if end_match:
        end = end_match.start()
    start = _skip_whitespace(text, start, end)
    if start_match:
        start = _skip_credit(text, start, end)
    return start, _trim_end(text, start, end)


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
