"""The structure map of a loaded document: where its pages and sections lie in its decoded text.

Every offset in a repository points into a document's decoded text (`sources/<doc>.txt`). A PDF,
an EPUB, a Word file or a web page also has pages and headings; the structure map records them
as offset ranges of that same text, so the page and the section of any span (a passage, a
piece of evidence, a citation) are looked up by its start, never re-derived from the file. It
is stored beside the text as `sources/<doc>.structure.json`; a repository built before it
existed simply has none (no page, no section).
"""
from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass, field
from typing import Any

STRUCTURE_VERSION = 1


@dataclass(frozen=True)
class Page:
    """Page `number` (1-based, as a viewer counts) covers text[start:end]; `label` is the page
    number printed on it when the file defines one that differs (e.g. "iv", "A-3")."""

    number: int
    start: int
    end: int
    label: str | None = None


@dataclass(frozen=True)
class Heading:
    """A chapter or section heading: it opens at `start`, and its section runs until the next
    heading of the same or a higher level (a smaller number: 1 = chapter)."""

    level: int
    title: str
    start: int


@dataclass(frozen=True)
class Place:
    """Where a span lies: the page its start is on and the section path (outermost first)."""

    page: int | None = None
    page_label: str | None = None
    section: tuple[str, ...] = ()


@dataclass
class Structure:
    """Pages and headings of one document, in text order, plus its original file name and format
    (text, markdown, pdf, epub, html, docx)."""

    file: str = ""
    format: str = "text"
    pages: list[Page] = field(default_factory=list)
    headings: list[Heading] = field(default_factory=list)

    def place(self, offset: int) -> Place:
        page = self.page_at(offset)
        return Place(page.number if page else None, page.label if page else None, self.section_at(offset))

    def page_at(self, offset: int) -> Page | None:
        i = bisect.bisect_right(self._page_starts, offset) - 1
        return self.pages[i] if i >= 0 else None

    def section_at(self, offset: int) -> tuple[str, ...]:
        i = bisect.bisect_right(self._heading_starts, offset) - 1
        return self._paths[i] if i >= 0 else ()

    def breaks(self) -> list[int]:
        """Offsets no passage may run across: where a chapter or section opens."""
        return sorted({h.start for h in self.headings})

    def within(self, start: int, end: int) -> "Structure":
        """The map limited to text[start:end] (the body once a Gutenberg licence is cut): headings
        outside it are dropped, so the licence's title never names a section of the book."""
        headings = [h for h in self.headings if start <= h.start < end]
        return Structure(self.file, self.format, list(self.pages), headings)

    @functools.cached_property
    def _page_starts(self) -> list[int]:
        return [p.start for p in self.pages]

    @functools.cached_property
    def _heading_starts(self) -> list[int]:
        return [h.start for h in self.headings]

    @functools.cached_property
    def _paths(self) -> list[tuple[str, ...]]:
        """Each heading's section path: the titles of the headings it is nested in, then its own."""
        stack: list[Heading] = []
        paths = []
        for heading in self.headings:
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
            paths.append(tuple(h.title for h in stack))
        return paths

    # ----------------------------------------------------------------------------------------
    # JSON (compact rows: a long PDF has thousands of pages)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": STRUCTURE_VERSION, "file": self.file, "format": self.format,
            "pages": [[p.number, p.start, p.end, p.label] for p in self.pages],
            "headings": [[h.level, h.start, h.title] for h in self.headings],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Structure":
        return cls(
            file=str(data.get("file", "")), format=str(data.get("format", "text")),
            pages=[Page(int(n), int(s), int(e), label) for n, s, e, label in data.get("pages", [])],
            headings=[Heading(int(level), str(title), int(start)) for level, start, title in data.get("headings", [])],
        )

    def __getstate__(self) -> dict[str, Any]:  # pickled into caches without the derived lookups
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


def cite_place(page: int | None, page_label: str | None, section, line: int | None = None) -> str:
    """How a citation says where it is: "p. 37, 3 Setup › 3.2 Installing"; a document with
    neither pages nor sections (plain text) by its line."""
    parts = []
    if page is not None:
        parts.append(f"p. {page_label or page}")
    if section:
        parts.append(" \u203a ".join(section))
    if not parts and line:
        parts.append(f"line {line}")
    return ", ".join(parts)
