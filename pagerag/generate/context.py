"""From retrieved evidence to what the judge and the answerer read.

The evidence E is cut into sentence windows (whole sentences, the rerank operator's windows);
the windows are ordered by their best sentence (the learned sentence ranker, sentences.py), and
the best windows, up to `generate.context_tokens`, become the numbered excerpts an LLM sees and
an answer cites as [n]. Every excerpt's text is checked against the source span it claims.
"""
from __future__ import annotations

import math
import re
from typing import Callable, Sequence

import numpy as np

from ..offline import count_tokens
from ..records import Evidence, Excerpt, Window, set_place

Encode = Callable[[list[str]], np.ndarray]


# --------------------------------------------------------------------------------------------
# IDF over the repository's passages

def make_idf(state) -> Callable[[str], float]:
    """IDF of a word stem over the repository's passages (counts from the state's snapshot)."""
    df, n = state.stem_frequencies()
    return lambda stem: math.log((n + 1) / (df.get(stem, 0) + 0.5))


# --------------------------------------------------------------------------------------------
# Windows


def evidence_windows(evidence: Sequence[Evidence], state, model: str) -> list[Window]:
    """The sentence windows of every evidence span: the repository's own windows of its passage
    (cut once, shared with the rerank operator) that lie inside the span."""
    from ..retrieve.windows import windows_within

    return [w for ev in evidence
            for w in windows_within(state, model, state.passage_index[ev.passage_id], ev.start, ev.end)]


def window_vectors(windows: list[Window], state, model: str, encode: Encode) -> np.ndarray:
    """Embeddings of the windows: the window index's vectors for the passages' own windows
    (embedded once per passage), one batch of new embeddings for any other piece."""
    from ..retrieve.windows import window_index

    index = window_index(state, model)
    rows = sorted({state.passage_index[w.passage_id] for w in windows})
    index.ensure(rows, encode)
    out: list[np.ndarray | None] = []
    missing: list[int] = []
    for i, w in enumerate(windows):
        row = state.passage_index[w.passage_id]
        spans = [(x.start, x.end) for x in index.windows_of(row)]
        if (w.start, w.end) in spans and row in index.vectors:
            out.append(index.vectors[row][spans.index((w.start, w.end))])
        else:
            out.append(None)
            missing.append(i)
    if missing:
        fresh = encode([windows[i].text for i in missing])
        for i, vec in zip(missing, fresh):
            out[i] = vec
    return np.asarray(out, dtype=np.float32).reshape(len(windows), -1)


# --------------------------------------------------------------------------------------------
# Excerpts


def build_excerpts(windows: list[Window], state, max_tokens: int, encoding: str = "cl100k_base",
                   first: Sequence[Window] = ()) -> list[Excerpt]:
    """The best windows (in `first` order, then by score) up to `max_tokens`, overlapping or
    touching windows of one passage merged, numbered 1..k best first."""
    chosen: list[Window] = []
    used = 0
    ranked = list(first) + sorted((w for w in windows if all(w is not f for f in first)), key=lambda w: -w.score)
    for w in ranked:
        cost = count_tokens(w.text, encoding)
        if used + cost > max_tokens and chosen:
            continue
        chosen.append(w)
        used += cost
        if used >= max_tokens:
            break
    return [make_excerpt(state, head, start, end, n, score, encoding)
            for n, (start, end, head, score) in enumerate(_merge(chosen), start=1)]


def make_excerpt(state, where: Window, start: int, end: int, n: int, score: float,
                 encoding: str = "cl100k_base") -> Excerpt:
    """Excerpt [n]: source[start:end] of the passage `where` lies in, with its line and tokens."""
    source = state.source_text(where.doc_id)
    excerpt = Excerpt(where.passage_id, where.doc_id, where.file, start, end, source[start:end], n=n,
                      score=round(score, 4))
    excerpt.n_tokens = count_tokens(excerpt.text, encoding)
    excerpt.line = excerpt.line_in(source)
    return set_place(excerpt, state.place(where.doc_id, start))


def _merge(chosen: list[Window]) -> list[tuple[int, int, Window, float]]:
    """Merge windows of one passage that overlap or touch: (start, end, first window, best score),
    in the first (best) window's rank."""
    groups: list[list[Window]] = []
    for w in chosen:
        for group in groups:
            if group[0].passage_id == w.passage_id and any(w.start <= g.end + 2 and g.start <= w.end + 2 for g in group):
                group.append(w)
                break
        else:
            groups.append([w])
    return [(min(g.start for g in group), max(g.end for g in group), group[0], max(g.score for g in group))
            for group in groups]


def fold_space(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# --------------------------------------------------------------------------------------------
# Graph context: what the graph says beside the excerpts (never cited itself)

HINT_LABELS = {"point": "key point", "path": "path", "community": "community"}


def graph_context(hints: Sequence, excerpts: Sequence[Excerpt], max_tokens: int,
                  encoding: str = "cl100k_base") -> str:
    """The labelled graph-context block of the judge and answer prompts ("" when there is none).

    Only a hint drawn from a shown excerpt is kept, and it names that excerpt: a statement from
    the graph can then be cited only through the passage it came from. Key points of the global
    map-reduce first, then paths, then community summaries, each best first, up to `max_tokens`."""
    if max_tokens <= 0 or not hints or not excerpts:
        return ""
    order = {kind: i for i, kind in enumerate(HINT_LABELS)}
    lines, used = [], 0
    for hint in sorted(hints, key=lambda h: (order.get(h.kind, len(order)), -h.score)):
        refs = sorted({e.n for e in excerpts if e.passage_id in set(hint.passage_ids)})
        if not refs:
            continue
        line = f"- {HINT_LABELS.get(hint.kind, hint.kind)}: {fold_space(hint.text)} (from {', '.join(f'[{n}]' for n in refs)})"
        cost = count_tokens(line, encoding)
        if used + cost > max_tokens:
            continue
        lines.append(line.replace("<<<", "< < <").replace(">>>", "> > >"))
        used += cost
    if not lines:
        return ""
    return ("\nGraph context: what the book's entity graph links to these excerpts. It is not evidence and "
            "cannot be cited; cite only the numbered excerpts.\n<<<\n" + "\n".join(lines) + "\n>>>\n")

