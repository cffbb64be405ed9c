"""PDF text layers as text with pages and sections.

Read with pypdf (BSD, pure Python; not PyMuPDF, which is AGPL, nor pdfplumber, which brings
pdfminer.six and a 6 MB pdfium binary). Each page's text comes with the position of its lines
(pypdf's visitor), which gives what the plain extraction loses: a paragraph break where the gap
between lines is clearly wider than the page's line spacing or the type size changes, and the
running headers and footers (a top or bottom line repeated, numbers aside, on many pages),
which are dropped. A page whose last line is full joins the next with a line break, so a
paragraph running on to the next page stays one; a short last line ends its paragraph. Sections come from the PDF's outline (bookmarks), each placed at the line that
carries its title on its page (else where its destination points); page numbers are the
viewer's, with the printed label when the PDF defines one.

Refused, each with one line: an encrypted PDF without its password (`--password`), a PDF whose
pages mostly have no text layer (a scan: OCR it first), and one whose text layer is garbage
(garbage.py).
"""
from __future__ import annotations

import contextlib
import io
import logging
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .document import Decoded, Layout, fold_inline
from .garbage import garbage_reason

PARAGRAPH_GAP = 1.3  # a gap this many times the usual line spacing ends a paragraph
PITCH_QUANTILE = 0.25  # the usual line spacing: this quantile of the gaps between lines of one type size
SHORT_LINE = 0.8  # a page ending in a line shorter than this share of a full line ends a paragraph
SIZE_CHANGE = 1.15  # so does a change of type size by this factor (a heading)
RUNNING_SHARE = 0.4  # a top/bottom line on this share of the pages (3 at least) is a running head
MAX_EMPTY_SHARE = 0.5  # more pages than this without text: a scan
_DIGITS = re.compile(r"\d+")
_FOLD = re.compile(r"[\W_]+")


@dataclass
class Line:
    text: str
    x: float
    y: float
    size: float


def read_pdf(path: Path, raw: bytes, password: str | None) -> Decoded:
    with _quiet_pypdf():
        reader = _open(path, raw, password)
        pages, failed = _read_pages(reader)
        outline = _outline(reader)
        labels = _labels(reader, len(pages))
    notes = [f"page {n} could not be read ({why}) and is left out" for n, why in failed]
    empty = [i + 1 for i, lines in enumerate(pages) if not any(any(c.isalnum() for c in l.text) for l in lines)]
    _check_text_layer(path, reader, pages, empty)
    if empty:
        one = len(empty) == 1
        notes.append(f"{_pages_named(empty)} {'has' if one else 'have'} no text layer (images or blank) "
                     f"and {'is' if one else 'are'} left out")
    _drop_running_lines(pages)
    return _lay_out(pages, outline, labels, _pitches(pages)).decoded("pdf text layer", notes)


@contextlib.contextmanager
def _quiet_pypdf():
    """pypdf logs its repairs of damaged files as warnings; the user gets one line or none."""
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _open(path: Path, raw: bytes, password: str | None):
    from pypdf import PdfReader
    from pypdf import PasswordType
    from pypdf.errors import DependencyError

    try:
        reader = PdfReader(io.BytesIO(raw), strict=False)
        encrypted = reader.is_encrypted
    except Exception as exc:  # pypdf raises many kinds on a damaged file
        raise InputError(f"{path}: not a readable PDF ({_short(exc)})") from None
    if encrypted:
        try:
            result = reader.decrypt(password or "")
        except DependencyError:
            raise InputError(f"{path}: the PDF is AES-encrypted and the cryptography package is missing "
                             "(pip install cryptography)") from None
        except Exception as exc:
            raise InputError(f"{path}: cannot decrypt the PDF ({_short(exc)})") from None
        if result == PasswordType.NOT_DECRYPTED:
            if password:
                raise InputError(f"{path}: the PDF is encrypted and --password is not its password")
            raise InputError(f"{path}: the PDF is encrypted: give its password with --password "
                             "(or PAGERAG_PDF_PASSWORD)")
    return reader


def _read_pages(reader) -> tuple[list[list[Line]], list[tuple[int, str]]]:
    pages, failed = [], []
    for number, page in enumerate(reader.pages, start=1):
        try:
            pages.append(page_lines(page))
        except Exception as exc:  # one damaged page does not lose the book
            pages.append([])
            failed.append((number, _short(exc)))
    return pages, failed


def page_lines(page) -> list[Line]:
    """The page's lines in reading order, each with where it starts and its type size."""
    lines: list[Line] = []
    current: list[str] = []
    where: list[float] | None = None

    def visit(text, cm, tm, font, size) -> None:
        nonlocal where
        for i, part in enumerate(text.split("\n")):
            if i:
                _end_line(lines, current, where)
                current.clear()
                where = None
            if part.strip() and where is None:
                x = cm[0] * tm[4] + cm[2] * tm[5] + cm[4]
                y = cm[1] * tm[4] + cm[3] * tm[5] + cm[5]
                where = [x, y, abs(size * tm[3] * cm[3]) or abs(size)]
            current.append(part)

    page.extract_text(visitor_text=visit)
    _end_line(lines, current, where)
    return lines


def _end_line(lines: list[Line], parts: list[str], where: list[float] | None) -> None:
    text = fold_inline("".join(parts)).replace("\n", " ")
    if text and where is not None:
        lines.append(Line(text, where[0], where[1], where[2]))


# --------------------------------------------------------------------------------------------
# What is refused


def _check_text_layer(path: Path, reader, pages: list[list[Line]], empty: list[int]) -> None:
    if len(empty) == len(pages) and not any(_has_image(p) for p in reader.pages):
        raise InputError(f"{path}: no text in this PDF (an empty document)")
    if len(empty) > MAX_EMPTY_SHARE * len(pages):
        raise InputError(f"{path}: no text layer on {_pages_named(empty)} of {len(pages)} (a scanned document?): "
                         "run OCR on it first (e.g. ocrmypdf) and build the OCR'd PDF")
    text = "\n".join(line.text for lines in pages for line in lines)
    reason = garbage_reason(text)
    if reason:
        bad = [i + 1 for i, lines in enumerate(pages) if lines and garbage_reason(" ".join(l.text for l in lines))]
        raise InputError(f"{path}: the PDF's text layer is garbage ({reason}, on {_pages_named(bad or [1])}): "
                         "its fonts have no Unicode map; run OCR on it first (e.g. ocrmypdf --force-ocr)")


def _has_image(page) -> bool:
    try:
        xobjects = page.get("/Resources", {}).get("/XObject", {})
        return any(x.get_object().get("/Subtype") == "/Image" for x in xobjects.values())
    except Exception:
        return True  # cannot tell: say "scanned?" rather than "empty"


def _pages_named(numbers: list[int]) -> str:
    """"page 3", "pages 1-4, 9" (runs folded)."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:12]) + (", …" if len(runs) > 12 else "")
    return f"page{'s' if len(numbers) > 1 else ''} {shown}"


# --------------------------------------------------------------------------------------------
# Running heads and footers


def _drop_running_lines(pages: list[list[Line]]) -> None:
    """Remove each page's top or bottom line when the same line, numbers aside, is the top or
    bottom line of many pages (a running head, a page number, a footer)."""
    if len(pages) < 3:
        return
    for pick in (max, min):  # the top line (largest y), then the bottom line
        ends = [pick(lines, key=lambda l: l.y) if lines else None for lines in pages]
        keys = [_running_key(line.text) if line else None for line in ends]
        counts: dict[str, int] = {}
        for key in keys:
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
        need = max(3, RUNNING_SHARE * len(pages))
        for lines, line, key in zip(pages, ends, keys):
            if key is not None and counts[key] >= need:
                lines.remove(line)


def _running_key(text: str) -> str:
    return _DIGITS.sub("#", " ".join(text.casefold().split()))


# --------------------------------------------------------------------------------------------
# Outline (bookmarks) and page labels


def _outline(reader) -> list[tuple[int, str, int, float | None]]:
    """(level, title, page index, top of the destination) of each bookmark, in outline order."""
    out: list[tuple[int, str, int, float | None]] = []

    def walk(items, level: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
                continue
            try:
                index = reader.get_destination_page_number(item)
                title = " ".join(str(item.title or "").split())
                top = item.top if getattr(item, "top", None) is not None else None
            except Exception:
                continue  # a bookmark to nowhere
            if title and index is not None and index >= 0:
                out.append((level, title, index, float(top) if top is not None else None))

    try:
        walk(reader.outline, 1)
    except Exception:
        return []
    return out


def _labels(reader, count: int) -> list[str | None]:
    """The printed page label of each page, None where it is just the page number."""
    try:
        labels = list(reader.page_labels)
    except Exception:
        labels = []
    labels += [""] * (count - len(labels))
    return [None if not label or label == str(i + 1) else label for i, label in enumerate(labels[:count])]


# --------------------------------------------------------------------------------------------
# Layout: paragraphs from line gaps, sections at their title lines


def _lay_out(pages: list[list[Line]], outline, labels, pitches: dict[int, float]) -> Layout:
    layout = Layout()
    lengths = sorted(len(line.text) for lines in pages for line in lines)
    full = lengths[int(0.9 * (len(lengths) - 1))] if lengths else 0  # the length of a full line
    by_page: dict[int, list[tuple[int, str, float | None]]] = {}
    for level, title, index, top in outline:
        by_page.setdefault(index, []).append((level, title, top))
    runs_on = False  # the text so far ends inside a paragraph (its last line was full)
    for index, lines in enumerate(pages):
        layout.page(index + 1, labels[index])
        _lay_out_page(layout, lines, _section_starts(lines, by_page.get(index, [])), pitches, runs_on)
        if lines:
            runs_on = len(lines[-1].text) >= SHORT_LINE * full
    return layout


def _lay_out_page(layout: Layout, lines: list[Line], starts, pitches: dict[int, float], runs_on: bool) -> None:
    opens = {i for i, _ in starts}
    first = True
    for start, block in _blocks(lines, opens, pitches):
        for at, heading in starts:
            if at == start:
                layout.section(*heading)
        # the page's first paragraph runs on from the page before, unless that ended or a section opens
        separator = "\n" if first and runs_on and start not in opens else "\n\n"
        if layout.paragraph("\n".join(line.text for line in block), separator) is not None:
            first = False
    for at, heading in starts:  # a bookmark to a page without text: its section starts after it
        if at >= len(lines):
            layout.section(*heading)


def _section_starts(lines: list[Line], marks) -> list[tuple[int, tuple[int, str]]]:
    """(line index, (level, title)) where each bookmark of this page starts its section."""
    out, search = [], 0
    for level, title, top in marks:
        at = _title_line(lines, title, search)
        if at is None and top is not None:
            at = next((i for i in range(search, len(lines)) if lines[i].y <= top + 1.0), None)
        at = search if at is None else at
        out.append((at, (level, title)))
        search = at
    return out


def _title_line(lines: list[Line], title: str, start: int) -> int | None:
    wanted = _FOLD.sub("", title.casefold())
    for i in range(start, len(lines)):
        got = _FOLD.sub("", lines[i].text.casefold())
        # the line starts with the title, or is the first line of a title set on two lines
        if wanted and got and (got.startswith(wanted[:40]) or (wanted.startswith(got) and 2 * len(got) >= len(wanted))):
            return i
    return None


def _blocks(lines: list[Line], forced: set[int], pitches: dict[int, float]) -> list[tuple[int, list[Line]]]:
    """(index of first line, lines) of each paragraph: a new one where a section starts, where the
    gap to the line before is wide, or where the type size changes."""
    blocks: list[tuple[int, list[Line]]] = []
    for i, line in enumerate(lines):
        if i == 0 or i in forced or _breaks(lines[i - 1], line, pitches.get(round(line.size), 0.0)):
            blocks.append((i, []))
        blocks[-1][1].append(line)
    return blocks


def _pitches(pages: list[list[Line]]) -> dict[int, float]:
    """The usual spacing of lines of each type size, over the whole document: a page of short
    paragraphs (a title page) has more paragraph gaps than line gaps, a document has not."""
    gaps: dict[int, list[float]] = {}
    for lines in pages:
        for a, b in zip(lines, lines[1:]):
            if round(a.size) == round(b.size) and 0 < a.y - b.y < 4 * max(a.size, 1.0):
                gaps.setdefault(round(b.size), []).append(a.y - b.y)
    return {size: statistics.quantiles(found, n=100, method="inclusive")[int(PITCH_QUANTILE * 100) - 1]
            if len(found) > 1 else found[0] for size, found in gaps.items()}


def _breaks(before: Line, line: Line, pitch: float) -> bool:
    gap = before.y - line.y
    if gap <= 0:  # back up the page: a new column or a box
        return True
    sizes = sorted((before.size or 1.0, line.size or 1.0))
    if sizes[1] / sizes[0] >= SIZE_CHANGE:
        return True
    return pitch > 0 and gap > PARAGRAPH_GAP * pitch


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0][:120] if str(exc) else ""
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__
