"""Is a PDF's text layer text? A font embedded without a map from its glyphs to Unicode (no
ToUnicode table, a custom encoding) gives a text layer that extracts as nonsense: glyph numbers
read as characters — control characters where the spaces were, letters shifted ("/LQH" for
"Line"). Such a file must be OCR'd; building from it would publish garbage passages.

Two signals, each with a threshold far from what real text does in any language (they were set
from what extraction gives, not fitted on any question set):
- unmapped characters — control characters other than whitespace, private-use and unassigned
  code points, U+FFFD — are 0 in real text (a symbol font's bullets make a few per cent); a
  tenth of the non-space characters is garbage;
- words of Latin letters, four or more long, with no vowel (a, e, i, o, u, y, accented or not)
  are a few per cent of English, French or German prose; when glyph numbers shift the letters
  they are a third or more. Only checked with enough such words, so other scripts are not judged.
"""
from __future__ import annotations

import re
import unicodedata

MAX_UNMAPPED = 0.10
MAX_VOWELLESS = 0.30
MIN_WORDS = 40
_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]{4,}")
_VOWELS = frozenset("aeiouyAEIOUY")
_UNMAPPED_CATEGORIES = frozenset(("Cc", "Co", "Cn", "Cs"))


def unmapped_share(text: str) -> float:
    """Share of non-space characters that are no text: controls, private use, unassigned, U+FFFD."""
    visible = [c for c in text if not c.isspace()]
    if not visible:
        return 0.0
    bad = sum(1 for c in visible if c == "\ufffd" or unicodedata.category(c) in _UNMAPPED_CATEGORIES)
    return bad / len(visible)


def vowelless_share(text: str) -> tuple[float, int]:
    """(share of Latin words of 4+ letters without a vowel, how many such words there are)."""
    words = _WORD.findall(text)
    if not words:
        return 0.0, 0
    without = sum(1 for w in words if not any(_is_vowel(c) for c in w))
    return without / len(words), len(words)


def _is_vowel(char: str) -> bool:
    return char in _VOWELS or unicodedata.normalize("NFD", char)[0] in _VOWELS


def garbage_reason(text: str) -> str | None:
    """Why `text` is not text (None when it is)."""
    unmapped = unmapped_share(text)
    if unmapped >= MAX_UNMAPPED:
        return f"{unmapped:.0%} of its characters are unmapped glyphs"
    vowelless, words = vowelless_share(text)
    if words >= MIN_WORDS and vowelless >= MAX_VOWELLESS:
        return f"{vowelless:.0%} of its words have no vowel"
    return None
