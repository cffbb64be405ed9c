"""Web pages (and the XHTML inside an EPUB) as text with headings: the main text, not the menus.

Parsed with Beautiful Soup on the standard library's html.parser (pure Python, no binary
parser to install). A page's main text is its <main>, else its one <article>, else an element
with role="main", else its <body>; inside that, navigation, asides, footers, forms and scripts
are dropped, and — when the page marks nothing up — blocks whose text is mostly links (menus)
and blocks named like menus, sidebars or footers. Headings h1–h6 become the section map,
nested by level; paragraphs, list items (`- `), table rows (cells apart by ` | `) and
preformatted text keep their breaks, and whitespace is folded as a browser folds it.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError
from .document import Decoded, Layout, fold_inline

HEADINGS = {f"h{n}": n for n in range(1, 7)}
_SKIP = {"script", "style", "noscript", "template", "svg", "iframe", "object", "embed", "canvas", "button",
         "input", "select", "textarea", "head", "title", "meta", "link", "audio", "video", "map"}
_BOILERPLATE = {"nav", "aside", "footer", "form", "dialog", "menu"}
_BOILERPLATE_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar", "dialog"}
_BOILERPLATE_NAMES = re.compile(
    r"(?:^|[-_ ])(?:nav|navbar|navigation|menu|sidebar|footer|breadcrumbs?|cookies?|banner|masthead|skip|share|"
    r"social|related|advert|ads|promo|subscribe|newsletter|comments?)(?:[-_ ]|$)", re.IGNORECASE)
_BLOCKS = {"p", "div", "section", "article", "main", "header", "footer", "blockquote", "pre", "ul", "ol", "li",
           "dl", "dt", "dd", "table", "figure", "figcaption", "hr", "address", "details", "summary", "center",
           "body", "fieldset", "caption", "nav", "aside", *HEADINGS}
_ITEMS = {"li", "dt", "dd"}
_SPACE_RUN = re.compile(r"[ \t\n\r\f]+")
_LINK_SHARE = 0.6  # a block whose text is mostly link text is a menu
_MIN_LINKS = 3


def read_html(path: Path, raw: bytes) -> Decoded:
    soup = parse(path, raw)
    layout = Layout()
    Renderer(layout).render(main_content(soup))
    return layout.decoded(soup.original_encoding or "utf-8")


def parse(path: Path, raw: bytes):
    """The parsed document; the encoding is found as a browser would (BOM, <meta charset>, then
    a guess)."""
    from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)  # XHTML is read as HTML, on purpose
        try:
            return BeautifulSoup(raw, "html.parser")
        except Exception as exc:  # html.parser gives up only on badly broken markup
            raise InputError(f"{path}: not readable as HTML ({exc.__class__.__name__})") from None


def main_content(soup):
    """The element holding the page's main text, cleaned of what is not."""
    for tag in soup.find_all(_SKIP):
        tag.decompose()
    body = soup.body or soup
    container = _semantic_main(body)
    for tag in container.find_all(True):
        if tag.decomposed:
            continue
        if tag.name in _BOILERPLATE or tag.get("role") in _BOILERPLATE_ROLES or _hidden(tag):
            tag.decompose()
    if container is body:  # nothing marked the main text up: drop what looks like menus
        for tag in body.find_all(True):
            if not tag.decomposed and (tag.name == "header" or _named_boilerplate(tag) or _mostly_links(tag)):
                tag.decompose()
    return container


def _semantic_main(body):
    mains = body.find_all("main")
    if len(mains) == 1:
        return mains[0]
    articles = body.find_all("article")
    if len(articles) == 1:
        return articles[0]
    role_main = body.find(attrs={"role": "main"})
    return role_main if role_main is not None else body


def _hidden(tag) -> bool:
    return tag.has_attr("hidden") or str(tag.get("aria-hidden", "")).lower() == "true"


def _named_boilerplate(tag) -> bool:
    names = [str(tag.get("id", ""))] + [str(c) for c in tag.get("class", []) or []]
    return any(_BOILERPLATE_NAMES.search(name) for name in names if name)


def _mostly_links(tag) -> bool:
    if tag.name not in ("ul", "ol", "div", "table", "section", "dl"):
        return False
    links = tag.find_all("a")
    if len(links) < _MIN_LINKS:
        return False
    text = len(" ".join(tag.get_text(" ").split()))
    linked = sum(len(" ".join(a.get_text(" ").split())) for a in links)
    return text > 0 and linked / text >= _LINK_SHARE


class Renderer:
    """Walks an element in document order and writes its blocks into a Layout. `prefix` names
    anchors (an EPUB's table of contents points at `file#id`)."""

    def __init__(self, layout: Layout, prefix: str | None = None):
        self.layout = layout
        self.prefix = prefix
        self._inline: list[str] = []
        self._item = False  # the last block written was a list item or table row
        self._numbers: list[int | None] = []  # the counter of each open list (None: bullets)

    def render(self, element) -> None:
        self._walk(element, pre=False)
        self._flush()

    def _walk(self, element, pre: bool) -> None:
        from bs4 import NavigableString
        from bs4.element import Comment, Declaration, Doctype, ProcessingInstruction

        for child in element.children:
            if isinstance(child, (Comment, Declaration, Doctype, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                self._inline.append(str(child) if pre else _SPACE_RUN.sub(" ", str(child)))
                continue
            self._element(child, pre)

    def _element(self, tag, pre: bool) -> None:
        name = tag.name
        if name in _BLOCKS or name in ("table", "pre"):
            self._flush()  # an anchor on a block names where the block starts
        self._anchor(tag)
        if name == "br":
            self._inline.append("\n")
        elif name in HEADINGS:
            for inner in tag.find_all(id=True):  # <h2><a id="chap1"/>STAVE ONE</h2>
                self._anchor(inner)
            self.layout.heading(HEADINGS[name], " ".join(tag.get_text(" ").split()))
            self._item = False
        elif name == "table":
            self._table(tag)
        elif name in ("ul", "ol"):
            self._flush()
            if not self._numbers:
                self._item = False  # a new list is a new paragraph; a nested one goes on line by line
            self._numbers.append(1 if name == "ol" else None)
            self._walk(tag, pre)
            self._flush()
            self._numbers.pop()
        elif name in _ITEMS:
            self._flush()
            self._inline.append(self._marker(name))
            self._walk(tag, pre)
            self._flush(item=True)
        elif name in _BLOCKS or name == "pre":
            self._flush()
            self._walk(tag, pre or name == "pre")
            self._flush()
        else:
            self._walk(tag, pre)

    def _anchor(self, tag) -> None:
        """Name the paragraph this element starts or lies in (it starts with the next paragraph
        written, and an inline element's paragraph is written after it)."""
        if self.prefix is not None and tag.get("id"):
            self.layout.anchor(f"{self.prefix}#{tag['id']}")

    def _marker(self, name: str) -> str:
        if name != "li" or not self._numbers:
            return ""
        number = self._numbers[-1]
        if number is None:
            return "- "
        self._numbers[-1] = number + 1
        return f"{number}. "

    def _table(self, table) -> None:
        self._flush()
        self._item = False
        for row in table.find_all("tr"):
            cells = [" ".join(c.get_text(" ").split()) for c in row.find_all(("td", "th"), recursive=False)]
            cells = [c for c in cells if c]
            if cells:
                self._write(" | ".join(cells), item=True)

    def _flush(self, item: bool = False) -> None:
        text = fold_inline("".join(self._inline))
        self._inline.clear()
        if text:
            self._write(text, item)

    def _write(self, text: str, item: bool = False) -> None:
        # list items and table rows follow each other line by line; other blocks are paragraphs
        self.layout.paragraph(text, "\n" if item and self._item else "\n\n")
        self._item = item
