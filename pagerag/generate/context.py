"""From retrieved evidence to what the judge and the answerer read.

The evidence E is cut into sentence windows (whole sentences, the rerank operator's windows);
each window is scored against the question (embedding cosine plus IDF-weighted word overlap),
and the best windows, up to `generate.context_tokens`, become the numbered excerpts an LLM sees
and an answer cites as [n]. Keeping only the relevant windows is what holds a question under
~2,000 prompt tokens for judge + answer while the retrieval budget stays at 2,000 tokens of
passages. Every excerpt's text is checked against the source span it claims.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..errors import RepositoryError
from ..offline import count_tokens
from .question import QuestionTerms, stems_of
from .records import Excerpt

Encode = Callable[[list[str]], np.ndarray]
DENSE_WEIGHT = 0.6  # cosine and lexical coverage both lie in [0, 1]; cosine orders paraphrases better


@dataclass
class Window:
    """Consecutive whole sentences inside one evidence span."""

    evidence_index: int
    passage_id: str
    doc_id: str
    file: str
    start: int
    end: int
    text: str
    sentences: list[tuple[int, int]]  # absolute spans of its sentences
    score: float = 0.0


def line_of(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1


# --------------------------------------------------------------------------------------------
# IDF over the repository's passages (cached per repository version)

_IDF: dict[str, tuple[Counter, int]] = {}


def idf_table(state) -> tuple[Counter, int]:
    if state.key not in _IDF:
        df: Counter = Counter()
        for passage in state.passages:
            df.update(stems_of(passage.text))
        _IDF[state.key] = (df, len(state.passages))
    return _IDF[state.key]


def make_idf(state) -> Callable[[str], float]:
    df, n = idf_table(state)
    return lambda stem: math.log((n + 1) / (df.get(stem, 0) + 0.5))


# --------------------------------------------------------------------------------------------
# Windows


def evidence_windows(evidence: Sequence, state, max_chars: int = 320) -> list[Window]:
    """Sentence windows of every evidence span (the rerank operator's cut, so its cached window
    vectors can be reused)."""
    from ..retrieve.rerank import passage_windows
    from ..text.sentences import split_sentences

    out: list[Window] = []
    for i, ev in enumerate(evidence):
        source = state.source_text(ev.doc_id)
        if source[ev.start:ev.end] != ev.text:
            raise RepositoryError(f"evidence {ev.passage_id} does not match its source span; rebuild the repository")
        sentences = split_sentences(source, ev.start, ev.end)
        for s, e in passage_windows(source, ev.start, ev.end, max_chars):
            inside = [(a, b) for a, b in sentences if a >= s and b <= e] or [(s, e)]
            out.append(Window(i, ev.passage_id, ev.doc_id, ev.file, s, e, source[s:e], inside))
    return out


def lexical_coverage(terms: QuestionTerms, text: str, idf: Callable[[str], float]) -> float:
    """IDF-weighted share of the question's stems (names and attributes) found in `text`."""
    stems = terms.all_stems
    total = sum(idf(s) for s in stems)
    if total <= 0:
        return 0.0
    present = stems_of(text)
    return sum(idf(s) for s in stems if s in present) / total


def window_vectors(windows: list[Window], state, model: str, encode: Encode) -> np.ndarray:
    """Embeddings of the windows: the rerank operator's cached window vectors where the spans
    match (untrimmed evidence), one batch of new embeddings for the rest."""
    from ..retrieve.rerank import window_index

    index = window_index(state, model)
    rows = sorted({state.passage_index[w.passage_id] for w in windows if w.passage_id in state.passage_index})
    index.ensure(rows, encode)
    out: list[np.ndarray | None] = []
    missing: list[int] = []
    for i, w in enumerate(windows):
        row = state.passage_index.get(w.passage_id)
        spans = index.spans.get(row, []) if row is not None else []
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


def score_windows(windows: list[Window], terms: QuestionTerms, idf: Callable[[str], float],
                  question_vec: np.ndarray | None = None, vectors: np.ndarray | None = None) -> None:
    """Set each window's score: DENSE_WEIGHT * cosine + (1 - DENSE_WEIGHT) * lexical coverage
    (lexical only when no vectors are given)."""
    lexical = [lexical_coverage(terms, w.text, idf) for w in windows]
    if question_vec is None or vectors is None or not windows:
        for w, lex in zip(windows, lexical):
            w.score = lex
        return
    cosines = np.asarray(vectors, dtype=np.float32) @ np.asarray(question_vec, dtype=np.float32)
    for w, lex, cos in zip(windows, lexical, cosines):
        w.score = DENSE_WEIGHT * float(cos) + (1 - DENSE_WEIGHT) * lex


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
    merged = _merge(chosen)
    excerpts = []
    for n, (w, score) in enumerate(merged, start=1):
        source = state.source_text(w.doc_id)
        text = source[w.start:w.end]
        excerpts.append(Excerpt(n, w.passage_id, w.doc_id, w.file, w.start, w.end, text,
                                count_tokens(text, encoding), line_of(source, w.start), round(score, 4)))
    return excerpts


def _merge(chosen: list[Window]) -> list[tuple[Window, float]]:
    """Merge windows of one passage that overlap or touch; keep the first (best) one's rank."""
    groups: list[list[Window]] = []
    for w in chosen:
        for group in groups:
            if group[0].passage_id == w.passage_id and any(w.start <= g.end + 2 and g.start <= w.end + 2 for g in group):
                group.append(w)
                break
        else:
            groups.append([w])
    out = []
    for group in groups:
        start, end = min(g.start for g in group), max(g.end for g in group)
        head = group[0]
        out.append((Window(head.evidence_index, head.passage_id, head.doc_id, head.file, start, end, "",
                           [s for g in group for s in g.sentences]), max(g.score for g in group)))
    return out


def fold_space(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
