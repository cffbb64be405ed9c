"""Lay out what a structured file says (paragraphs, headings, pages) as one plain text with its
structure map, offsets exact by construction.

Every reader of a non-text format (pdf.py, epub.py, html.py, docx.py) writes through a Layout,
so all of them produce the same kind of text: paragraphs apart by a blank line (a hard break
for the sentence splitter), each heading a paragraph of its own, whitespace inside a paragraph
folded the way the format means it. The same book in any format then reads the same.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..structure import Heading, Page

_SPACES = re.compile(r"[ \t\r\f\v\u00a0\u2000-\u200a\u202f\u205f\u3000]+")
_BLANK_LINES = re.compile(r"\n\s*\n")


@dataclass
class Decoded:
    """What a reader got out of a file: the text, its pages and headings (offsets into `text`),
    how it was decoded, and notes for the user (e.g. pages left out)."""

    text: str
    encoding: str
    pages: list[Page] = field(default_factory=list)
    headings: list[Heading] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def fold_inline(text: str) -> str:
    """Whitespace folded as HTML and Word mean it: runs of spaces become one, line breaks stay
    (a <br> or a Word line break is a real one), no space at either end of a line."""
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(lines).strip("\n")


class Layout:
    """Appends paragraphs, headings and page starts; `decoded()` gives the text and its map."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self.headings: list[Heading] = []
        self._pages: list[list] = []  # [number, start (None until its first text), label]
        self._pending: list[str] = []  # anchors waiting for the next paragraph
        self._sections: list[tuple[int, str]] = []  # sections waiting for the next paragraph
        self.anchors: dict[str, int] = {}

    @property
    def length(self) -> int:
        return self._length

    def paragraph(self, text: str, separator: str = "\n\n") -> int | None:
        """Append a paragraph (blank lines inside it are folded: it stays one paragraph); its
        start offset, or None when it holds no text. `separator` "\\n" continues the previous
        paragraph on a new line (a PDF paragraph running on across a page)."""
        text = _BLANK_LINES.sub("\n", text).strip()
        if not text:
            return None
        if self._length:
            self._write(separator)
        start = self._length
        self._write(text)
        self._resolve(start)
        return start

    def heading(self, level: int, title: str) -> int | None:
        """A heading: a paragraph of its own, one line, recorded in the map."""
        title = " ".join(title.split())
        start = self.paragraph(title)
        if start is not None:
            self.headings.append(Heading(level, title, start))
        return start

    def section(self, level: int, title: str) -> None:
        """A section titled `title` starts with the next paragraph (whose text may say it in
        other words: a PDF bookmark names the line it points at)."""
        self._sections.append((level, " ".join(title.split())))

    def anchor(self, name: str) -> None:
        """Name the start of the next paragraph (an EPUB table of contents points at these)."""
        self._pending.append(name)

    def page(self, number: int, label: str | None = None) -> None:
        """Page `number` starts with the next text written (a page without text is empty)."""
        self._pages.append([number, None, label])

    def decoded(self, encoding: str, notes: list[str] | None = None) -> Decoded:
        text = "".join(self._parts)
        self._resolve(len(text))
        pages = [Page(number, start, self._pages[i + 1][1] if i + 1 < len(self._pages) else len(text), label)
                 for i, (number, start, label) in enumerate(self._pages)]
        return Decoded(text, encoding, pages, list(self.headings), list(notes or []))

    def _resolve(self, start: int) -> None:
        """Anchors, sections and pages waiting for text start at `start`."""
        for anchor in self._pending:
            self.anchors[anchor] = start
        self._pending.clear()
        self.headings.extend(Heading(level, title, start) for level, title in self._sections)
        self._sections.clear()
        for page in reversed(self._pages):
            if page[1] is not None:
                break
            page[1] = start

    def _write(self, text: str) -> None:
        self._parts.append(text)
        self._length += len(text)
