"""The evidence, sentence by sentence: the features of each sentence against the question, and
the reader's verdict on each.

Every sentence of every evidence window is described by how much of the question it (and its
neighbours) holds, how close its window's embedding is to the question's, where its passage
ranks and how long it is; the best cosine and lexical cover feed the sufficiency model. The
reader (pagerag.read, a cross-encoder trained on the training books) then reads the first
READ_LIMIT sentences, in evidence order, each in its place in the book: P(the sentence states
the answer) orders the sentences the extractive answerer quotes and the LLM reads, and its span
is the extractive answer. The features are computed here and only here, at question time and
when the training tables are made (pagerag.train.features), so the models score what they were
fitted on.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..records import Evidence, Window
from ..text.words import stems_of
from .question import QuestionTerms

READ_LIMIT = 64  # sentences the reader reads per question (its latency budget: <= 150 ms here)
SENTENCE_FEATURES = ("lex", "lex_ctx", "attr", "attr_ctx", "names", "dense", "dense_gap", "lex_gap", "rank",
                     "length")


@dataclass
class Sentence:
    """One evidence sentence: source[start:end] inside `window` (the best-scoring window that
    holds it), its features and the ranker's probability that it states the answer."""

    window: Window
    start: int
    end: int
    features: dict[str, float]
    prob: float = 0.0  # the reader's P(the sentence states the answer); 0 for a sentence not read
    span: tuple[int, int] | None = None  # the reader's answer span (absolute offsets)
    margin: float = float("-inf")  # the span's score minus the no-answer score

    @property
    def text(self) -> str:
        w = self.window
        return w.text[self.start - w.start: self.end - w.start]


def _coverage(stems: Sequence[str], present: set[str], idf: Callable[[str], float]) -> float:
    total = sum(idf(s) for s in stems)
    return sum(idf(s) for s in stems if s in present) / total if total > 0 else 0.0


def _names_share(terms: QuestionTerms, text: str) -> float:
    if not terms.name_tokens:
        return 1.0
    low = text.lower()
    return sum(any(t.lower() in low for t in tokens) for tokens in terms.name_tokens) / len(terms.name_tokens)


def evidence_sentences(terms: QuestionTerms, windows: Sequence[Window], cosines: Sequence[float],
                       evidence: Sequence[Evidence], idf: Callable[[str], float]) -> list[Sentence]:
    """Every distinct sentence of the evidence windows with its features (in evidence order).

    `cosines[i]` is window i's embedding cosine with the question; a sentence in several windows
    takes the best. Neighbours are the sentences before and after it in the same evidence span.
    """
    rank_of = {e.passage_id: e.rank for e in evidence}
    by_span: dict[tuple[str, int, int], tuple[Window, float]] = {}
    for w, cos in zip(windows, cosines):
        for s, e in w.sentences:
            key = (w.passage_id, s, e)
            if key not in by_span or cos > by_span[key][1]:
                by_span[key] = (w, float(cos))
    keys = sorted(by_span, key=lambda k: (rank_of.get(k[0], 0), k[1]))
    texts = [_text(by_span[k][0], k[1], k[2]) for k in keys]
    stems = [stems_of(t) for t in texts]
    out: list[Sentence] = []
    for i, (key, text) in enumerate(zip(keys, texts)):
        window, cos = by_span[key]
        around = [j for j in (i - 1, i, i + 1) if 0 <= j < len(keys) and keys[j][0] == key[0]]
        ctx_stems = set().union(*(stems[j] for j in around))
        ctx_text = " ".join(texts[j] for j in around)
        attributes = terms.attributes or terms.all_stems
        out.append(Sentence(window, key[1], key[2], {
            "lex": _coverage(terms.all_stems, stems[i], idf),
            "lex_ctx": _coverage(terms.all_stems, ctx_stems, idf),
            "attr": _coverage(attributes, stems[i], idf),
            "attr_ctx": _coverage(attributes, ctx_stems, idf),
            "names": _names_share(terms, ctx_text),
            "dense": cos,
            "rank": math.log1p(rank_of.get(key[0], len(evidence) + 1)),
            "length": math.log1p(len(text) / 100.0),
        }))
    if out:
        best_dense = max(s.features["dense"] for s in out)
        best_lex = max(s.features["lex"] for s in out)
        for s in out:
            s.features["dense_gap"] = s.features["dense"] - best_dense
            s.features["lex_gap"] = s.features["lex"] - best_lex
    return out


def _text(w: Window, start: int, end: int) -> str:
    return w.text[max(0, start - w.start): max(0, end - w.start)]


def read_sentences(question: str, sentences: list[Sentence], state, reader) -> list[Sentence]:
    """The reader's P, span and margin on the first READ_LIMIT sentences (evidence order), each
    read in its place in the book; return them best first (ties: evidence order). Sentences past
    the limit keep P 0 and are not returned."""
    from ..read import around

    read = sentences[:READ_LIMIT]
    if not read:
        return []
    passages = [around(state.source_text(s.window.doc_id), s.start, s.end) for s in read]
    for s, r in zip(read, reader.read(question, passages)):
        s.prob, s.margin = r.p, r.margin
        s.span = (s.start + r.span[0], s.start + r.span[1]) if r.span else None
    return sorted(read, key=lambda x: -x.prob)


CHOOSER_FEATURES = ("reader_logit", "lex", "dense")  # what picks the sentence an extractive answer quotes


def chooser_rows(probs, lex, dense) -> "np.ndarray":
    """The chooser's inputs per sentence: the reader's P as a logit, the question's share of the
    sentence's words (lex), the window's cosine (dense)."""
    p = np.clip(np.asarray(probs, dtype=np.float64), 1e-6, 1 - 1e-6)
    return np.column_stack([np.log(p / (1 - p)), np.asarray(lex, dtype=np.float64), np.asarray(dense, dtype=np.float64)])


def chooser_scores(chooser: dict | None, probs, lex, dense) -> "np.ndarray":
    """How likely each sentence is to be a right answer when quoted (a logistic model fitted on the
    training books, pagerag.train.stack.fit_chooser); without one, the reader's P alone."""
    if not chooser:
        return np.asarray(probs, dtype=np.float64)
    return chooser_rows(probs, lex, dense) @ np.asarray(chooser["coef"], dtype=np.float64) + float(chooser["intercept"])


def answer_first(ranked: list[Sentence], chooser: dict | None) -> list[Sentence]:
    """The read sentences with the one the chooser rates best first (the rest keep their order):
    held out on the training books the reader's top sentence was seldom the right one to quote
    (docs/decision.md)."""
    if not ranked or not chooser:
        return ranked
    scores = chooser_scores(chooser, [s.prob for s in ranked], [s.features.get("lex", 0.0) for s in ranked],
                            [s.features.get("dense", 0.0) for s in ranked])
    best = int(np.argmax(scores))
    return [ranked[best]] + ranked[:best] + ranked[best + 1:]


def window_order(ranked: Sequence[Sentence], windows: Sequence[Window]) -> list[Window]:
    """The evidence windows ordered by their best sentence's probability (what an LLM reads first);
    windows holding no ranked sentence follow in their own order."""
    best: dict[int, float] = {}
    for s in ranked:
        for i, w in enumerate(windows):
            if w.passage_id == s.window.passage_id and w.start <= s.start and s.end <= w.end:
                best[i] = max(best.get(i, 0.0), s.prob)
    order = sorted(range(len(windows)), key=lambda i: (-best.get(i, -1.0), i))
    return [windows[i] for i in order]


@dataclass
class Reading:
    """The question read against its evidence: what the ranker and the sufficiency model need."""

    terms: QuestionTerms
    windows: list[Window]
    sentences: list[Sentence]
    idf: Callable[[str], float]


def read_evidence(question: str, evidence: Sequence[Evidence], state, model: str, encode) -> Reading:
    """Cut the evidence into its sentence windows, embed-score them against the question (the
    window index's vectors) and describe every sentence (`evidence_sentences`)."""
    from .context import evidence_windows, make_idf, window_vectors
    from .question import read_question

    terms = read_question(question)
    windows = evidence_windows(evidence, state, model)
    idf = make_idf(state)
    cosines: list[float] = []
    if windows:
        qvec = np.asarray(encode([question])[0], dtype=np.float32)
        cosines = [float(c) for c in window_vectors(windows, state, model, encode) @ qvec]
        for w, c in zip(windows, cosines):
            w.score = c
    return Reading(terms, windows, evidence_sentences(terms, windows, cosines, evidence, idf), idf)
