"""Sentence-aware token windows with character offsets: build stage 2 (the textual floor).

A passage is a run of whole sentences of about `settings.tokens` tiktoken tokens; the next
passage repeats the last sentences of the previous one (about `settings.overlap` of a window),
so an answer that straddles a boundary is still whole in one passage. A sentence longer than a
window is cut at line breaks, then at token boundaries. When a word-piece counter is given, no
passage exceeds the embedder's `max_wordpieces` (with [CLS]/[SEP]) whatever `tokens` is, so the
embedder never silently truncates a passage.

Costs are batched: one tiktoken `encode_ordinary_batch` and one word-piece batch over all
sentences, then one of each over the passages (for the exact `n_tokens` and a final cap check).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable

from ..offline import get_encoding
from ..records import Passage, SourceDoc
from ..settings import ChunkSettings
from .sentences import split_sentences

WordpieceCounter = Callable[[list[str]], list[int]]
_SPECIAL_PIECES = 2  # [CLS] and [SEP], counted once per passage, not per sentence


@dataclass
class _Unit:
    """A sentence (or a piece of an over-long one): the smallest thing a window holds."""

    start: int
    end: int
    tokens: int
    pieces: int  # word pieces without [CLS]/[SEP]; 0 when no counter is given


@dataclass
class _Budget:
    tokens: int
    pieces: int  # word-piece budget without [CLS]/[SEP]
    overlap_tokens: float


def chunk_documents(
    docs: Iterable[SourceDoc],
    settings: ChunkSettings,
    count_wordpieces: WordpieceCounter | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Passage]:
    """Passages of all documents in order; `progress(1)` is called after each document."""
    passages: list[Passage] = []
    for doc in docs:
        passages.extend(chunk_document(doc, settings, count_wordpieces))
        if progress:
            progress(1)
    return passages


def chunk_document(
    doc: SourceDoc, settings: ChunkSettings, count_wordpieces: WordpieceCounter | None = None
) -> list[Passage]:
    """Passages covering the body of `doc`; `doc.text[p.start:p.end] == p.text` for each."""
    encoding = get_encoding(settings.encoding)
    budget = _Budget(
        tokens=settings.tokens,
        pieces=(settings.max_wordpieces - _SPECIAL_PIECES) if count_wordpieces else 10**9,
        overlap_tokens=settings.overlap * settings.tokens,
    )
    spans = split_sentences(doc.text, doc.content_start, doc.content_end)
    units = _fit_units(doc.text, spans, encoding, count_wordpieces, budget)
    windows = _pack_windows(units, budget)
    if count_wordpieces:
        windows = _enforce_wordpiece_cap(doc.text, units, windows, count_wordpieces, settings.max_wordpieces)
    return _make_passages(doc, units, windows, encoding)


# --------------------------------------------------------------------------------------------
# Units: measured sentences, over-long ones cut down to size


def _measure(text: str, spans: list[tuple[int, int]], encoding, count_wordpieces: WordpieceCounter | None) -> list[_Unit]:
    """Token and word-piece counts of many spans in two batched calls.

    Tokens are counted with the whitespace before each span, as it will appear inside a window
    (" word" is often one token where "\\n\\nword" is two), so window sums track real counts.
    """
    if not spans:
        return []
    with_space = [text[prev_end:end] for prev_end, end in zip([spans[0][0]] + [e for _, e in spans[:-1]], (e for _, e in spans))]
    tokens = [len(ids) for ids in encoding.encode_ordinary_batch(with_space)]
    if count_wordpieces:
        pieces = [max(0, n - _SPECIAL_PIECES) for n in count_wordpieces([text[s:e] for s, e in spans])]
    else:
        pieces = [0] * len(spans)
    return [_Unit(s, e, t, p) for (s, e), t, p in zip(spans, tokens, pieces)]


def _fit_units(text: str, spans, encoding, count_wordpieces, budget: _Budget) -> list[_Unit]:
    units = _measure(text, spans, encoding, count_wordpieces)
    fitted: list[_Unit] = []
    for unit in units:
        if unit.tokens <= budget.tokens and unit.pieces <= budget.pieces:
            fitted.append(unit)
        else:
            fitted.extend(_split_unit(text, unit, encoding, count_wordpieces, budget))
    return fitted


def _split_unit(text: str, unit: _Unit, encoding, count_wordpieces, budget: _Budget) -> list[_Unit]:
    """Cut an over-long unit at line breaks if it has any (verse, tables), else at token boundaries."""
    spans = _line_spans(text, unit.start, unit.end)
    if len(spans) <= 1:
        spans = _token_spans(text, unit, encoding, budget)
    if len(spans) <= 1 or spans == [(unit.start, unit.end)]:
        return [unit]  # a single token: nothing smaller exists
    return _fit_units(text, spans, encoding, count_wordpieces, budget)


def _line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans, pos = [], start
    while pos < end:
        newline = text.find("\n", pos, end)
        stop = end if newline == -1 else newline
        if trimmed := _trim(text, pos, stop):
            spans.append(trimmed)
        pos = stop + 1
    return spans


def _token_spans(text: str, unit: _Unit, encoding, budget: _Budget) -> list[tuple[int, int]]:
    """Equal-sized pieces cut at token boundaries, mapped back to character offsets."""
    piece_text = text[unit.start : unit.end]
    ids = encoding.encode_ordinary(piece_text)
    decoded, offsets = encoding.decode_with_offsets(ids)
    if decoded != piece_text:  # cannot happen for valid Unicode; fall back to character cuts
        offsets = [round(i * len(piece_text) / len(ids)) for i in range(len(ids))]
    n_pieces = max(2, math.ceil(len(ids) / budget.tokens), math.ceil(unit.pieces / max(1, budget.pieces)))
    n_pieces = min(n_pieces, len(ids))
    cuts = [offsets[round(k * len(ids) / n_pieces)] for k in range(n_pieces)] + [len(piece_text)]
    spans = []
    for lo, hi in zip(cuts, cuts[1:]):
        if trimmed := _trim(text, unit.start + lo, unit.start + hi):
            spans.append(trimmed)
    return spans


def _trim(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


# --------------------------------------------------------------------------------------------
# Windows: runs of units [first, last) within the budget, overlapping by whole units


def _pack_windows(units: list[_Unit], budget: _Budget) -> list[tuple[int, int]]:
    windows: list[tuple[int, int]] = []
    first = 0
    while first < len(units):
        last, tokens, pieces = first, 0, 0
        while last < len(units) and (
            last == first
            or (tokens + units[last].tokens <= budget.tokens and pieces + units[last].pieces <= budget.pieces)
        ):
            tokens += units[last].tokens
            pieces += units[last].pieces
            last += 1
        windows.append((first, last))
        if last >= len(units):
            break
        first = _next_first(units, first, last, budget)
    return windows


def _next_first(units: list[_Unit], first: int, last: int, budget: _Budget) -> int:
    """Start of the next window: carry the trailing units whose tokens come closest to the overlap.

    The carry never holds the whole previous window (the text must advance) and always leaves
    room for the next new unit, so every window brings new text.
    """
    best_start, best_gap = last, budget.overlap_tokens
    tokens = pieces = 0
    for start in range(last - 1, first, -1):
        tokens += units[start].tokens
        pieces += units[start].pieces
        if tokens + units[last].tokens > budget.tokens or pieces + units[last].pieces > budget.pieces:
            break
        gap = abs(tokens - budget.overlap_tokens)
        if gap < best_gap:
            best_start, best_gap = start, gap
    return best_start


def _enforce_wordpiece_cap(
    text: str, units: list[_Unit], windows: list[tuple[int, int]], count_wordpieces: WordpieceCounter, cap: int
) -> list[tuple[int, int]]:
    """Recount whole passages and halve any window over the cap.

    Sums of sentence counts are exact for whitespace-separated sentences; a sentence cut inside
    a word can count differently when rejoined, so this is the guarantee, not the plan.
    """
    while True:
        counts = count_wordpieces([text[units[a].start : units[b - 1].end] for a, b in windows])
        over = {i for i, n in enumerate(counts) if n > cap and windows[i][1] - windows[i][0] > 1}
        if not over:
            return windows
        fixed: list[tuple[int, int]] = []
        for i, (a, b) in enumerate(windows):
            if i in over:
                mid = (a + b) // 2
                fixed += [(a, mid), (mid, b)]
            else:
                fixed.append((a, b))
        windows = fixed


def _make_passages(doc: SourceDoc, units: list[_Unit], windows: list[tuple[int, int]], encoding) -> list[Passage]:
    texts = [doc.text[units[a].start : units[b - 1].end] for a, b in windows]
    n_tokens = [len(ids) for ids in encoding.encode_ordinary_batch(texts)] if texts else []
    return [
        Passage(
            passage_id=f"{doc.doc_id}:{ordinal:05d}", doc_id=doc.doc_id, file=doc.path,
            start=units[a].start, end=units[b - 1].end, text=passage_text, n_tokens=count, ordinal=ordinal,
        )
        for ordinal, ((a, b), passage_text, count) in enumerate(zip(windows, texts, n_tokens))
    ]
