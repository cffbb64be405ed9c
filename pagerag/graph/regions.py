"""Where passages sit in their source: overlapping passages stitched back into contiguous regions,
regions cut into pieces for the parser, and the passages that contain a span of the source."""
from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass

from ..errors import InputError
from ..records import Passage


@dataclass
class Piece:
    doc_id: str
    start: int  # offset of the piece in the source text
    text: str


class PassageLocator:
    """Which passages of one document contain the span [start, end) of its source text."""

    def __init__(self, passages: list[Passage]):
        self.passages = sorted(passages, key=lambda p: (p.start, p.end))
        self.starts = [p.start for p in self.passages]
        self.max_end: list[int] = []
        running = -1
        for p in self.passages:
            running = max(running, p.end)
            self.max_end.append(running)

    def containing(self, start: int, end: int) -> list[str]:
        """Passages holding the whole span; if it straddles a boundary, those it overlaps."""
        i = bisect.bisect_left(self.starts, end) - 1
        inside, overlapping = [], []
        while i >= 0 and self.max_end[i] > start:
            p = self.passages[i]
            if p.start <= start and end <= p.end:
                inside.append(p.passage_id)
            elif p.start < end and start < p.end:
                overlapping.append(p.passage_id)
            i -= 1
        return (inside or overlapping)[::-1]


def source_regions(passages: list[Passage]) -> list[Piece]:
    """Overlapping/adjacent passages stitched back into contiguous source text, per document."""
    by_doc: dict[str, list[Passage]] = defaultdict(list)
    for p in passages:
        if len(p.text) != p.end - p.start:
            raise InputError(f"passage {p.passage_id}: text length {len(p.text)} != end - start ({p.end - p.start})")
        by_doc[p.doc_id].append(p)
    regions: list[Piece] = []
    for doc_id, group in by_doc.items():
        group.sort(key=lambda p: (p.start, p.end))
        current: Piece | None = None
        for p in group:
            if current is not None and p.start <= current.start + len(current.text):
                cur_end = current.start + len(current.text)
                if p.end > cur_end:
                    current.text += p.text[cur_end - p.start :]
                continue
            current = Piece(doc_id, p.start, p.text)
            regions.append(current)
    return regions


_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"[.!?][\"'”’)]*\s+")


def split_pieces(region: Piece, max_chars: int) -> list[Piece]:
    """Cut a region at paragraph breaks into pieces of about `max_chars`; an over-long paragraph
    is cut at its last sentence end (else whitespace) before the limit. Offsets stay exact."""
    text, pieces, lo = region.text, [], 0
    while lo < len(text):
        hi = min(lo + max_chars, len(text))
        if hi < len(text):
            hi = _cut_point(text, lo, hi)
        pieces.append(Piece(region.doc_id, region.start + lo, text[lo:hi]))
        lo = hi
    return pieces


def _cut_point(text: str, lo: int, hi: int) -> int:
    window = text[lo:hi]
    for pattern in (_PARAGRAPH_BREAK, _SENTENCE_END):
        ends = [m.end() for m in pattern.finditer(window)]
        if ends and ends[-1] > len(window) // 4:
            return lo + ends[-1]
    space = window.rfind(" ")
    return lo + space + 1 if space > len(window) // 4 else hi
