"""Word (.docx) documents as text with headings, lists and tables.

A .docx is a zip of XML parts; the standard library reads it (zipped.py). python-docx is not
used to read: it needs lxml (a 12 MB binary), and its paragraph text leaves out tracked
insertions (w:ins) and content controls (w:sdt), which are part of what the document says.
Headings are paragraphs whose style (or the style it is based on) has an outline level, or is
named "heading N"; list paragraphs get "- " or their number; a table becomes one line per row,
cells apart by " | ". Deleted text (tracked deletions) and field codes are left out.
"""
from __future__ import annotations

import posixpath
import re
from pathlib import Path
from xml.etree import ElementTree

from .document import Decoded, Layout, fold_inline
from .zipped import Zipped

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}Relationship"
_OFFICE_DOCUMENT = "/officeDocument"
# text that is not the document's: deletions, moved-away text, text boxes (a run inside a
# paragraph holding other paragraphs), the duplicate rendering of alternate content
_SKIP = {f"{W}del", f"{W}moveFrom", f"{W}txbxContent", _MC_FALLBACK, f"{W}pPr", f"{W}rPr", f"{W}instrText"}
_HEADING_NAME = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_BULLETS = {"bullet", "none"}


def read_docx(path: Path, raw: bytes, limit: int) -> Decoded:
    doc = Zipped(path, raw, "a Word document", limit)
    main = _main_part(doc)
    styles = _Styles(doc.xml("word/styles.xml")) if doc.has("word/styles.xml") else _Styles(None)
    numbering = _Numbering(doc.xml("word/numbering.xml")) if doc.has("word/numbering.xml") else _Numbering(None)
    body = doc.xml(main).find(f"{W}body")
    writer = _Writer(Layout(), styles, numbering)
    if body is not None:
        writer.blocks(body)
    return writer.layout.decoded("utf-8")


def _main_part(doc: Zipped) -> str:
    """The main document part, as the package's relationships name it."""
    if doc.has("_rels/.rels"):
        for rel in doc.xml("_rels/.rels").iter(_REL):
            if rel.get("Type", "").endswith(_OFFICE_DOCUMENT) and rel.get("Target"):
                return posixpath.normpath(rel.get("Target").lstrip("/"))
    return "word/document.xml"


class _Styles:
    """Heading level and list numbering of each paragraph style, through its basedOn chain."""

    def __init__(self, root: ElementTree.Element | None):
        self._styles: dict[str, ElementTree.Element] = {}
        if root is not None:
            for style in root.iter(f"{W}style"):
                if style.get(f"{W}type") == "paragraph" and style.get(f"{W}styleId"):
                    self._styles[style.get(f"{W}styleId")] = style

    def level(self, style_id: str | None) -> int | None:
        for style in self._chain(style_id):
            outline = style.find(f"{W}pPr/{W}outlineLvl")
            if outline is not None:
                value = int(outline.get(f"{W}val", "9"))
                return value + 1 if value < 9 else None
            name = style.find(f"{W}name")
            match = _HEADING_NAME.match(name.get(f"{W}val", "")) if name is not None else None
            if match:
                return int(match.group(1))
        return None

    def numbering(self, style_id: str | None) -> tuple[str, int] | None:
        for style in self._chain(style_id):
            num = style.find(f"{W}pPr/{W}numPr")
            if num is not None:
                return _num_pr(num)
        return None

    def _chain(self, style_id: str | None):
        seen = set()
        while style_id and style_id in self._styles and style_id not in seen:
            seen.add(style_id)
            style = self._styles[style_id]
            yield style
            based = style.find(f"{W}basedOn")
            style_id = based.get(f"{W}val") if based is not None else None


def _num_pr(num: ElementTree.Element) -> tuple[str, int] | None:
    num_id = num.find(f"{W}numId")
    ilvl = num.find(f"{W}ilvl")
    if num_id is None or num_id.get(f"{W}val") in (None, "0"):
        return None
    level = ilvl.get(f"{W}val", "0") if ilvl is not None else "0"
    return num_id.get(f"{W}val"), min(int(level), 8) if level.isdigit() else 0


class _Numbering:
    """List markers: "- " for bullets, "N. " counted per list and level."""

    def __init__(self, root: ElementTree.Element | None):
        self._formats: dict[tuple[str, int], str] = {}
        self._counters: dict[str, list[int]] = {}
        if root is None:
            return
        abstract = {a.get(f"{W}abstractNumId"): a for a in root.iter(f"{W}abstractNum")}
        for num in root.iter(f"{W}num"):
            ref = num.find(f"{W}abstractNumId")
            levels = abstract.get(ref.get(f"{W}val")) if ref is not None else None
            for lvl in levels.iter(f"{W}lvl") if levels is not None else ():
                fmt = lvl.find(f"{W}numFmt")
                self._formats[(num.get(f"{W}numId"), int(lvl.get(f"{W}ilvl", "0")))] = (
                    fmt.get(f"{W}val", "decimal") if fmt is not None else "decimal")

    def marker(self, num_id: str, level: int) -> str:
        if self._formats.get((num_id, level), "bullet") in _BULLETS:
            return "- "
        counts = self._counters.setdefault(num_id, [0] * 9)
        counts[level] += 1
        counts[level + 1 :] = [0] * (8 - level)  # a new item restarts the levels below it
        return f"{counts[level]}. "


class _Writer:
    def __init__(self, layout: Layout, styles: _Styles, numbering: _Numbering):
        self.layout, self.styles, self.numbering = layout, styles, numbering
        self._item = False  # the last block was a list item or table row: the next one follows by line

    def blocks(self, parent: ElementTree.Element) -> None:
        for child in parent:
            if child.tag == f"{W}p":
                self.paragraph(child)
            elif child.tag == f"{W}tbl":
                self.table(child)
            elif child.tag in (f"{W}sdt", f"{W}sdtContent", f"{W}customXml", f"{W}ins", f"{W}smartTag"):
                self.blocks(child)  # content controls and the like hold paragraphs

    def paragraph(self, p: ElementTree.Element) -> None:
        text = fold_inline(paragraph_text(p))
        style = p.find(f"{W}pPr/{W}pStyle")
        style_id = style.get(f"{W}val") if style is not None else None
        level = _own_outline(p) or self.styles.level(style_id)
        if level is not None:
            if self.layout.heading(level, text) is not None:
                self._item = False
            return
        own = p.find(f"{W}pPr/{W}numPr")
        numbered = _num_pr(own) if own is not None else self.styles.numbering(style_id)
        if numbered is not None and text:
            self._write(self.numbering.marker(*numbered) + text, item=True)
        else:
            self._write(text, item=False)

    def table(self, table: ElementTree.Element) -> None:
        self._item = False
        for row in table.iter(f"{W}tr"):
            cells = [fold_inline(" ".join(paragraph_text(p) for p in cell.iter(f"{W}p"))).replace("\n", " ")
                     for cell in row.findall(f"{W}tc")]
            cells = [c for c in cells if c]
            if cells:
                self._write(" | ".join(cells), item=True)
        self._item = False

    def _write(self, text: str, item: bool) -> None:
        if self.layout.paragraph(text, "\n" if item and self._item else "\n\n") is not None:
            self._item = item


def _own_outline(p: ElementTree.Element) -> int | None:
    outline = p.find(f"{W}pPr/{W}outlineLvl")
    value = int(outline.get(f"{W}val", "9")) if outline is not None else 9
    return value + 1 if value < 9 else None


def paragraph_text(element: ElementTree.Element) -> str:
    """The text of a paragraph in reading order: runs, tracked insertions, hyperlinks, fields'
    results; line breaks and tabs as "\\n" and "\\t"."""
    parts: list[str] = []
    _collect(element, parts)
    return "".join(parts)


def _collect(element: ElementTree.Element, parts: list[str]) -> None:
    for child in element:
        tag = child.tag
        if tag in _SKIP:
            continue
        if tag == f"{W}t":
            parts.append(child.text or "")
        elif tag == f"{W}tab":
            parts.append("\t")
        elif tag in (f"{W}br", f"{W}cr"):
            parts.append(" " if child.get(f"{W}type") == "page" else "\n")
        elif tag == f"{W}noBreakHyphen":
            parts.append("-")
        else:
            _collect(child, parts)
