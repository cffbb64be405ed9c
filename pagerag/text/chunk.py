"""Sentence-aware token windows with character offsets: build stage 2 (the textual floor).

A passage is a run of whole sentences of about `settings.tokens` tiktoken tokens; the next
passage repeats the last sentences of the previous one (about `settings.overlap` of a window),
so an answer that straddles a boundary is still whole in one passage. A sentence longer than a
window is cut at line breaks, then at token boundaries. When a word-piece counter is given, no
passage exceeds the embedder's `max_wordpieces` (with [CLS]/[SEP]) whatever `tokens` is, so the
embedder never silently truncates a passage.

Word pieces are counted where they are needed, in batches: with the default 200 tokens a window
is ~190 word pieces, so windows are packed by tokens, counted once, and only the rare window over
the cap has its sentences counted and is repacked. When `tokens` is large enough that the cap will
bind (e.g. 1000), sentences are counted up front and packed under both budgets, then checked.

A passage never runs across a section boundary (a heading of the document's structure map): a
sentence is cut at one, and a window that crosses one is cut there, its pieces that another
window already holds dropped. Windows that cross no boundary are exactly those of the same text
without a structure map, so the same book as plain text and as an EPUB chunks alike except at
its chapter starts.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Callable, Iterable

from ..offline import get_encoding
from ..records import Passage, SourceDoc, set_place
from ..settings import ChunkSettings
from .sentences import split_sentences, trim_span

WordpieceCounter = Callable[[list[str]], list[int]]
_SPECIAL_PIECES = 2  # [CLS] and [SEP], counted once per passage, not per sentence
_NO_CAP = 10**9
# Above this many word pieces per token of the target, the cap will bind for many windows
# (English prose runs ~0.95 pieces per cl100k token); count sentences up front then.
_PIECES_PER_TOKEN = 1.15


@dataclass
class _Unit:
    """A sentence (or a piece of an over-long one): the smallest thing a window holds."""

    start: int
    end: int
    tokens: int
    pieces: int | None = None  # word pieces without [CLS]/[SEP]; None until counted


@dataclass
class _Budget:
    tokens: int
    pieces: int  # word pieces without [CLS]/[SEP]
    overlap: float  # share of a window repeated at the start of the next one


Window = list[_Unit]


def chunk_documents(
    docs: Iterable[SourceDoc],
    settings: ChunkSettings,
    count_wordpieces: WordpieceCounter | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Passage]:
    """Passages of all documents in order.

    `progress(n)` is called after each document with the number of body characters just chunked
    (an increment; the total is `sum(len(doc.body) for doc in docs)`).
    """
    passages: list[Passage] = []
    for doc in docs:
        passages.extend(chunk_document(doc, settings, count_wordpieces))
        if progress:
            progress(len(doc.body))
    return passages


def chunk_document(
    doc: SourceDoc, settings: ChunkSettings, count_wordpieces: WordpieceCounter | None = None
) -> list[Passage]:
    """Passages covering the body of `doc`; `doc.text[p.start:p.end] == p.text` for each."""
    encoding = get_encoding(settings.encoding)
    cap = settings.max_wordpieces - _SPECIAL_PIECES
    eager = count_wordpieces is not None and settings.tokens * _PIECES_PER_TOKEN > cap
    budget = _Budget(settings.tokens, cap if eager else _NO_CAP, settings.overlap)
    counter = count_wordpieces if eager else None
    body_end = len(doc.text) if doc.content_end is None or doc.content_end < 0 else doc.content_end
    breaks = [b for b in doc.structure.breaks() if doc.content_start < b < body_end]
    spans = _cut_spans(doc.text, split_sentences(doc.text, doc.content_start, body_end), breaks)
    units = _fit(doc.text, _measure(doc.text, spans, encoding, counter), encoding, counter, budget)
    windows = _pack_windows(units, budget)
    if count_wordpieces:
        budget.pieces = cap
        windows = _enforce_wordpiece_cap(doc.text, windows, encoding, count_wordpieces, budget)
    return _make_passages(doc, _cut_windows(windows, breaks), encoding)


# --------------------------------------------------------------------------------------------
# Units: measured sentences, over-long ones cut down to size


def _measure(text: str, spans: list[tuple[int, int]], encoding, counter: WordpieceCounter | None) -> list[_Unit]:
    """Token counts (and word pieces when `counter` is given) of many spans, batched.

    Tokens are counted with the whitespace before each span, as it will appear inside a window
    (" word" is often one token where "\\n\\nword" is two), so window sums track real counts.
    """
    if not spans:
        return []
    previous_ends = [spans[0][0]] + [end for _, end in spans[:-1]]
    tokens = _count_tokens(encoding, [text[prev:end] for prev, (_, end) in zip(previous_ends, spans)])
    units = [_Unit(start, end, n) for (start, end), n in zip(spans, tokens)]
    if counter:
        _count_pieces(text, units, counter)
    return units


def _count_tokens(encoding, texts: list[str]) -> list[int]:
    # A plain loop, not `encode_ordinary_batch`: the batch call submits one thread-pool task per
    # text, and for ~10k short sentences that overhead makes it 2-3x slower (measured on Moby Dick).
    encode = encoding.encode_ordinary
    return [len(encode(t)) for t in texts]


def _count_pieces(text: str, units: list[_Unit], counter: WordpieceCounter) -> None:
    """Fill in `pieces` of the units not counted yet, in one batch."""
    todo = [u for u in units if u.pieces is None]
    if todo:
        for unit, n in zip(todo, counter([text[u.start : u.end] for u in todo])):
            unit.pieces = max(0, n - _SPECIAL_PIECES)


def _fits(unit: _Unit, budget: _Budget) -> bool:
    return unit.tokens <= budget.tokens and (unit.pieces or 0) <= budget.pieces


def _fit(text: str, units: list[_Unit], encoding, counter: WordpieceCounter | None, budget: _Budget) -> list[_Unit]:
    fitted: list[_Unit] = []
    for unit in units:
        fitted.extend([unit] if _fits(unit, budget) else _split_unit(text, unit, encoding, counter, budget))
    return fitted


def _split_unit(text: str, unit: _Unit, encoding, counter, budget: _Budget) -> list[_Unit]:
    """Cut an over-long unit at line breaks if it has any (verse, tables), else at token boundaries."""
    spans = _line_spans(text, unit.start, unit.end)
    if len(spans) <= 1:
        spans = _token_spans(text, unit, encoding, budget)
    if len(spans) <= 1 or spans == [(unit.start, unit.end)]:
        return [unit]  # a single token: nothing smaller exists
    return _fit(text, _measure(text, spans, encoding, counter), encoding, counter, budget)


def _line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans, pos = [], start
    while pos < end:
        newline = text.find("\n", pos, end)
        stop = end if newline == -1 else newline
        if trimmed := trim_span(text, pos, stop):
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
    n_pieces = max(2, math.ceil(len(ids) / budget.tokens), math.ceil((unit.pieces or 0) / budget.pieces))
    n_pieces = min(n_pieces, len(ids))
    cuts = [offsets[round(k * len(ids) / n_pieces)] for k in range(n_pieces)] + [len(piece_text)]
    spans = []
    for lo, hi in zip(cuts, cuts[1:]):
        if trimmed := trim_span(text, unit.start + lo, unit.start + hi):
            spans.append(trimmed)
    return spans


# --------------------------------------------------------------------------------------------
# Section boundaries


def _cut_spans(text: str, spans: list[tuple[int, int]], breaks: list[int]) -> list[tuple[int, int]]:
    """Sentence spans cut where a section opens (a heading glued to the sentence before it)."""
    if not breaks:
        return spans
    out = []
    for start, end in spans:
        inside = breaks[bisect.bisect_right(breaks, start) : bisect.bisect_left(breaks, end)]
        for lo, hi in zip([start, *inside], [*inside, end]):
            if trimmed := trim_span(text, lo, hi):
                out.append(trimmed)
    return out


def _cut_windows(windows: list[Window], breaks: list[int]) -> list[Window]:
    """Each window cut into its runs of units of one section; a piece that another piece holds
    whole is dropped (the window before a boundary and the one after it overlap)."""
    if not breaks:
        return windows
    pieces: list[Window] = []
    for window in windows:
        section = [bisect.bisect_right(breaks, u.start) for u in window]
        first = 0
        for i in range(1, len(window) + 1):
            if i == len(window) or section[i] != section[first]:
                pieces.append(window[first:i])
                first = i
    return [p for i, p in enumerate(pieces) if not _held_by_neighbour(pieces, i)]


def _held_by_neighbour(pieces: list[Window], i: int) -> bool:
    start, end = pieces[i][0].start, pieces[i][-1].end
    for j in range(max(0, i - 3), min(len(pieces), i + 4)):
        if j == i:
            continue
        other_start, other_end = pieces[j][0].start, pieces[j][-1].end
        if other_start <= start and end <= other_end and ((other_start, other_end) != (start, end) or j < i):
            return True
    return False


# --------------------------------------------------------------------------------------------
# Windows: runs of units within the budget, overlapping by whole units


def _pack_windows(units: list[_Unit], budget: _Budget) -> list[Window]:
    windows: list[Window] = []
    first = 0
    while first < len(units):
        last, tokens, pieces = first, 0, 0
        while last < len(units) and (
            last == first
            or (tokens + units[last].tokens <= budget.tokens and pieces + (units[last].pieces or 0) <= budget.pieces)
        ):
            tokens += units[last].tokens
            pieces += units[last].pieces or 0
            last += 1
        windows.append(units[first:last])
        if last >= len(units):
            break
        first = _next_first(units, first, last, tokens, budget)
    return windows


def _next_first(units: list[_Unit], first: int, last: int, tokens_in_window: int, budget: _Budget) -> int:
    """Start of the next window: carry the trailing units whose tokens come closest to the overlap.

    The overlap is a share of the window actually built (not of `settings.tokens`): when the
    word-piece cap keeps windows shorter than asked, the repeated text shrinks with them. The carry
    never holds the whole previous window (the text must advance) and always leaves room for the
    next new unit, so every window brings new text.
    """
    target = budget.overlap * tokens_in_window
    best_start, best_gap = last, target
    tokens = pieces = 0
    for start in range(last - 1, first, -1):
        tokens += units[start].tokens
        pieces += units[start].pieces or 0
        if tokens + units[last].tokens > budget.tokens or pieces + (units[last].pieces or 0) > budget.pieces:
            break
        gap = abs(tokens - target)
        if gap < best_gap:
            best_start, best_gap = start, gap
    return best_start


def _enforce_wordpiece_cap(
    text: str, windows: list[Window], encoding, counter: WordpieceCounter, budget: _Budget
) -> list[Window]:
    """Count every window's word pieces (the guarantee) and repack the ones over the cap.

    A window over the cap gets its sentences counted and is repacked under both budgets; if that
    changes nothing (a sentence cut inside a word can count differently once rejoined), it is
    halved. Repacked windows are checked again.
    """
    counts = counter([_window_text(text, w) for w in windows])
    result: list[Window] = []
    for window, count in zip(windows, counts):
        if count - _SPECIAL_PIECES <= budget.pieces:
            result.append(window)
            continue
        _count_pieces(text, window, counter)
        smaller = _pack_windows(_fit(text, window, encoding, counter, budget), budget)
        if smaller == [window]:
            if len(window) == 1:
                result.append(window)  # a single token: nothing smaller exists
                continue
            smaller = [window[: len(window) // 2], window[len(window) // 2 :]]
        result.extend(_enforce_wordpiece_cap(text, smaller, encoding, counter, budget))
    return result


def _window_text(text: str, window: Window) -> str:
    return text[window[0].start : window[-1].end]


def _make_passages(doc: SourceDoc, windows: list[Window], encoding) -> list[Passage]:
    texts = [_window_text(doc.text, w) for w in windows]
    n_tokens = _count_tokens(encoding, texts)
    return [
        set_place(Passage(
            passage_id=f"{doc.doc_id}:{ordinal:05d}", doc_id=doc.doc_id, file=doc.path,
            start=window[0].start, end=window[-1].end, text=passage_text, n_tokens=count, ordinal=ordinal,
        ), doc.structure.place(window[0].start))
        for ordinal, (window, passage_text, count) in enumerate(zip(windows, texts, n_tokens))
    ]
