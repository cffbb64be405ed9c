"""Markdown headings as a structure map; the text itself is kept as the file has it.

A Markdown file is loaded as text (its lines are what a citation points at); only its headings
are read, with markdown-it-py (CommonMark, already installed with rich): ATX (`## Title`) and
setext (`Title` over `===`) headings, but not a `#` line inside a fenced code block or a quote.
"""
from __future__ import annotations

from ..structure import Heading


def markdown_headings(text: str) -> list[Heading]:
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    line_starts = _line_starts(text)
    headings = []
    for i, token in enumerate(tokens):
        if token.type != "heading_open" or token.level != 0 or not token.map:
            continue  # level > 0: inside a quote or a list item, not the document's outline
        title = _plain(tokens[i + 1]) if i + 1 < len(tokens) else ""
        if title:
            headings.append(Heading(int(token.tag[1]), title, line_starts[token.map[0]]))
    return headings


def _plain(inline) -> str:
    """The words of a heading without its markup (emphasis, links, code marks)."""
    parts = [child.content for child in inline.children or [] if child.type in ("text", "code_inline")]
    if not parts and inline.children is None:
        parts = [inline.content]
    return " ".join(" ".join(parts).split())


def _line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts
