"""EPUB 2 and 3 books as text with chapters and sections.

An EPUB is a zip of XHTML chapters listed in reading order by its package file (the spine);
the standard library unpacks and parses it (zipped.py) and each chapter is read like a web page
(html.py). ebooklib is not used: it is AGPL-licensed, and a reader needs only the spine and the
table of contents. The sections come from the book's table of contents (the EPUB 3 nav
document, else the EPUB 2 NCX), nested as it nests them and placed where its links point; a
book without one falls back to its h1–h6 headings. A book whose chapters are encrypted (DRM,
declared in META-INF/encryption.xml) is refused: its text cannot be read.
"""
from __future__ import annotations

import posixpath
from pathlib import Path
from urllib.parse import unquote, urldefrag

from ..errors import InputError
from ..structure import Heading
from .document import Decoded, Layout
from .html import Renderer, parse
from .zipped import Zipped

_CONTAINER = "META-INF/container.xml"
_ENCRYPTION = "META-INF/encryption.xml"
_FONT_SUFFIXES = (".ttf", ".otf", ".woff", ".woff2")  # obfuscated fonts are not DRM
_XHTML = ("application/xhtml+xml", "text/html")
_NS = {
    "c": "urn:oasis:names:tc:opendocument:xmlns:container",
    "opf": "http://www.idpf.org/2007/opf",
    "ncx": "http://www.daisy.org/z3986/2005/ncx/",
    "enc": "http://www.w3.org/2001/04/xmlenc#",
}


def read_epub(path: Path, raw: bytes, limit: int) -> Decoded:
    book = Zipped(path, raw, "an EPUB", limit)
    _refuse_drm(book)
    opf_path = _package_path(book)
    manifest, spine, toc_id = _package(book, opf_path)
    if not spine:
        raise InputError(f"{path}: damaged EPUB: its spine lists no chapters")
    layout = Layout()
    for name in spine:
        layout.anchor(name)
        soup = parse(path, book.read(name))
        for tag in soup.find_all(("script", "style", "nav", "head")):
            tag.decompose()  # a table-of-contents page in the spine is navigation, not text
        Renderer(layout, prefix=name).render(soup.body or soup)
    toc = _toc(book, manifest, toc_id)
    headings = _placed(toc, layout.anchors)
    decoded = layout.decoded("utf-8")
    if headings:
        decoded.headings = headings
    return decoded


def _refuse_drm(book: Zipped) -> None:
    if not book.has(_ENCRYPTION):
        return
    root = book.xml(_ENCRYPTION)
    for ref in root.iter(f"{{{_NS['enc']}}}CipherReference"):
        uri = unquote(ref.get("URI", ""))
        if not uri.lower().endswith(_FONT_SUFFIXES):
            raise InputError(f"{book.path}: the EPUB is DRM-protected (its text is encrypted: {uri}); "
                             "only DRM-free books can be read")


def _package_path(book: Zipped) -> str:
    if not book.has(_CONTAINER):
        raise InputError(f"{book.path}: not a valid EPUB: {_CONTAINER} is missing")
    rootfile = book.xml(_CONTAINER).find(".//c:rootfile", _NS)
    if rootfile is None or not rootfile.get("full-path"):
        raise InputError(f"{book.path}: not a valid EPUB: {_CONTAINER} names no package file")
    return rootfile.get("full-path")


def _package(book: Zipped, opf_path: str) -> tuple[dict[str, tuple[str, str, str]], list[str], str | None]:
    """(manifest id -> (zip path, media type, properties), the spine's chapters in reading
    order, the id of the EPUB 2 table of contents)."""
    opf = book.xml(opf_path)
    base = posixpath.dirname(opf_path)
    manifest = {}
    for item in opf.iterfind("opf:manifest/opf:item", _NS):
        href = item.get("href")
        if item.get("id") and href:
            manifest[item.get("id")] = (_join(base, href), item.get("media-type", ""), item.get("properties", ""))
    spine_el = opf.find("opf:spine", _NS)
    if spine_el is None:
        return manifest, [], None
    spine = []
    for ref in spine_el.iterfind("opf:itemref", _NS):
        entry = manifest.get(ref.get("idref", ""))
        if entry and entry[1] in _XHTML and ref.get("linear", "yes") != "no":
            spine.append(entry[0])
    return manifest, spine, spine_el.get("toc")


def _join(base: str, href: str) -> str:
    return posixpath.normpath(posixpath.join(base, unquote(href)))


# --------------------------------------------------------------------------------------------
# Table of contents: (level, title, target) with target = "zip/path.xhtml" or "zip/path.xhtml#id"


def _toc(book: Zipped, manifest, toc_id: str | None) -> list[tuple[int, str, str]]:
    nav = next((m for m in manifest.values() if "nav" in m[2].split()), None)
    if nav is not None and book.has(nav[0]):
        entries = _nav_entries(book, nav[0])
        if entries:
            return entries
    ncx = manifest.get(toc_id or "") or next((m for m in manifest.values() if m[1] == "application/x-dtbncx+xml"), None)
    if ncx is not None and book.has(ncx[0]):
        return _ncx_entries(book, ncx[0])
    return []


def _nav_entries(book: Zipped, name: str) -> list[tuple[int, str, str]]:
    soup = parse(book.path, book.read(name))
    toc = next((n for n in soup.find_all("nav") if "toc" in str(n.get("epub:type", "")).split()), None)
    top = toc.find("ol") if toc is not None else None
    entries: list[tuple[int, str, str]] = []
    if top is not None:
        _walk_nav(top, 1, posixpath.dirname(name), entries)
    return entries


def _walk_nav(ol, level: int, base: str, out: list) -> None:
    for li in ol.find_all("li", recursive=False):
        label = li.find(("a", "span"), recursive=False)
        child = li.find("ol", recursive=False)
        if label is not None:
            href = label.get("href") if label.name == "a" else None
            target = _join(base, href) if href else _first_target(child, base)
            title = " ".join(label.get_text(" ").split())
            if title and target:
                out.append((level, title, target))
        if child is not None:
            _walk_nav(child, level + 1, base, out)


def _first_target(ol, base: str) -> str | None:
    link = ol.find("a", href=True) if ol is not None else None
    return _join(base, link["href"]) if link is not None else None


def _ncx_entries(book: Zipped, name: str) -> list[tuple[int, str, str]]:
    root = book.xml(name)
    base = posixpath.dirname(name)
    out: list[tuple[int, str, str]] = []

    def walk(parent, level: int) -> None:
        for point in parent.iterfind("ncx:navPoint", _NS):
            text = point.find("ncx:navLabel/ncx:text", _NS)
            content = point.find("ncx:content", _NS)
            title = " ".join((text.text or "").split()) if text is not None else ""
            if title and content is not None and content.get("src"):
                out.append((level, title, _join(base, content.get("src"))))
            walk(point, level + 1)

    nav_map = root.find("ncx:navMap", _NS)
    if nav_map is not None:
        walk(nav_map, 1)
    return out


def _placed(toc: list[tuple[int, str, str]], anchors: dict[str, int]) -> list[Heading]:
    """The entries whose target is in the text, as headings in text order (entries at one place
    keep the table's order: a part, then its first chapter)."""
    placed = []
    for order, (level, title, target) in enumerate(toc):
        file, fragment = urldefrag(target)
        offset = anchors.get(f"{file}#{fragment}" if fragment else file, anchors.get(file))
        if offset is not None:
            placed.append((offset, order, Heading(level, title, offset)))
    return [h for _, _, h in sorted(placed)]
