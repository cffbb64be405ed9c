"""Span vectors pooled from a text's token states ("late chunking"): the sentence windows' vectors.

A passage is embedded once; the same forward pass yields each word piece's contextual state, and
a window's vector is the unit mean of the states of the word pieces that lie inside it (character
offsets from the tokenizer). Embedding every window on its own cost more than the passage pass
itself (a book's windows hold ~1.25x its passages' word pieces), which doubled the build; pooled,
the windows cost a mean each. The pooled vector is not the window embedded alone (median cosine
~0.8 to it) but one read in its passage's context.

A span that holds no word piece the model read -- the passage was truncated at the model's
max_seq_length before the span ends -- is embedded on its own instead, so every span gets a
vector and no span is pooled from a part of its text.

Both encoders (ONNX and torch) give `token_batches(texts, batch_size, progress)`: per batch, the
indices of its texts, their unit sentence vectors and, per text, a `TokenStates`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

Span = tuple[int, int]


@dataclass
class TokenStates:
    """One text's word-piece states as the model read it."""

    states: np.ndarray  # (pieces, dim) float32, special tokens included
    offsets: np.ndarray  # (pieces, 2) character offsets into the text; (0, 0) for special tokens
    read_to: int  # the character where reading stopped: len(text), or the last piece read when truncated


def read_to(offsets: Sequence[tuple[int, int]], text_length: int, truncated: bool) -> int:
    """Where the model stopped reading a text: its end, or the end of the last word piece kept."""
    if not truncated:
        return text_length
    return max((int(b) for _, b in offsets), default=0)


def pool_spans(tokens: TokenStates, spans: Sequence[Span]) -> tuple[np.ndarray, list[int]]:
    """Unit mean states of the word pieces inside each span; and the indices of the spans that
    cannot be pooled (past where reading stopped, or holding no word piece): their rows are zero."""
    starts, ends = tokens.offsets[:, 0], tokens.offsets[:, 1]
    real = ends > starts  # special tokens have empty offsets
    out = np.zeros((len(spans), tokens.states.shape[1]), dtype=np.float32)
    alone: list[int] = []
    for k, (s, e) in enumerate(spans):
        inside = real & (starts >= s) & (ends <= e)
        if e > tokens.read_to or not inside.any():
            alone.append(k)
            continue
        mean = tokens.states[inside].astype(np.float64).mean(axis=0)
        out[k] = mean / max(np.linalg.norm(mean), 1e-12)
    return out, alone


def encode_with_spans(encoder: Any, texts: Sequence[str], spans: Sequence[Sequence[Span]], batch_size: int = 0,
                      progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(text vectors, span vectors): one row per text, and one per span in text order (spans[i]
    are character offsets into texts[i]). Spans that cannot be pooled are embedded on their own,
    in one batch at the end."""
    texts = list(texts)
    counts = [len(s) for s in spans]
    first = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    span_vectors = np.zeros((int(first[-1]), encoder.dim), dtype=np.float32)
    text_vectors = np.zeros((len(texts), encoder.dim), dtype=np.float32)
    alone: list[tuple[int, int]] = []  # (row in span_vectors, text index)
    for idx, vectors, states in encoder.token_batches(texts, batch_size, progress):
        text_vectors[idx] = vectors
        for i, tokens in zip(idx.tolist(), states):
            pooled, unpooled = pool_spans(tokens, spans[i])
            span_vectors[first[i]:first[i + 1]] = pooled
            alone.extend((first[i] + k, i) for k in unpooled)
    if alone:
        rows = [r for r, _ in alone]
        flat = [tuple(s) for ss in spans for s in ss]
        span_vectors[rows] = encoder.encode([texts[i][flat[r][0]:flat[r][1]] for r, i in alone], batch_size=batch_size)
    return text_vectors, span_vectors

