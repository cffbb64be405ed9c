"""The reader's training pairs: (question, sentence in its context) -> does the sentence state the
answer, and where.

Made from the feature tables (pagerag.train.features, which record every evidence sentence the
question path retrieved, with its context) and the corpus (pagerag.train.corpus), for the training
books only:

  positives  the retrieved sentences that state a located answer (an answer sentence: the gold
             answer string or, for GraphRAG-Bench, MIN_ANSWER_SCORE of its content words,
             pagerag.train.locate); for a question of
             the written sets whose answer no single sentence states (a summary, a relation), the
             sentences of its verbatim evidence quotes; and every answer sentence of the book that
             retrieval missed, read in its place (so the model sees each answer at least once). A
             GraphRAG-Bench question with no located answer sentence gives no pairs: its evidence
             is paraphrased, so which retrieved sentences state it is not known
  negatives  the other retrieved sentences of an answerable question (hardest first: the most
             question words around them and the closest embedding, above all those naming the
             asked character), leaving out
             any that holds a gold string or most of its words (a restatement is not a negative);
             and the retrieved sentences of unanswerable questions: written (qa/train), swapped
             and borrowed ones (masked questions are left out: their hidden facts are sometimes
             restated elsewhere, 20% of a hand-checked sample)
  spans      for a positive, the first occurrence of a gold answer or alias in the sentence
             (case-insensitive, leading article dropped); none when the answer is paraphrased (its
             span loss is then skipped); for a negative, the no-answer position
"""
from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..generate.sentences import SENTENCE_FEATURES
from .features import SENT_LABELS, read_tables
from .stack import WRITTEN_TYPES

NEGATIVES_PER_QUESTION = 10  # the hardest ...
RANDOM_NEGATIVES = 2
# A GraphRAG-Bench answer is a paraphrase, often a sentence long: a sentence holding 60% of its
# content words (the corpus's answer-sentence rule) is often only about the same thing. The reader
# learns from the ones holding at least this share (1.0: the gold string itself).
MIN_ANSWER_SCORE = 0.8  # ... and a few others, so easy sentences are seen too
NEGATIVE_KINDS = ("written", "swapped", "borrowed")
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)


@dataclass
class ReaderPair:
    book: str
    qid: str
    kind: str  # the example's kind (answerable, written, swapped, borrowed)
    question: str
    sentence: str
    before: str
    after: str
    label: int
    span: tuple[int, int] | None  # (start, end) in `sentence` of the answer, when found
    source: str  # retrieved | missed (an answer sentence retrieval did not return)
    written: bool = False  # from a written question set (qa/train), not GraphRAG-Bench or synthetic

    def to_dict(self) -> dict:
        return asdict(self)


def answer_span(sentence: str, golds: Sequence[str]) -> tuple[int, int] | None:
    """The first occurrence in the sentence of a gold answer or alias (longest first), as whole
    words, case-insensitive, with or without its leading article."""
    for gold in sorted((g.strip() for g in golds if g.strip()), key=len, reverse=True):
        for form in dict.fromkeys([gold, _ARTICLE.sub("", gold)]):
            words = form.strip(" .,;:!?\"'").split()
            if not words:
                continue
            m = re.search(r"(?<!\w)" + r"\s+".join(map(re.escape, words)) + r"(?!\w)", sentence, re.IGNORECASE)
            if m:
                return m.start(), m.end()
    return None


def _col(name: str) -> int:
    return SENT_LABELS.index(name)


def pairs_for_example(row: dict, corpus_example, rng: random.Random, sources: dict | None = None,
                      columns: Sequence[str] = ()) -> list[ReaderPair]:
    """The pairs of one example (its default retrieval); `columns`: the tables' sentence features."""
    from ..read import around

    v = row["variants"]["default"]
    texts = v.get("texts") or []
    labels = np.asarray(v["sent_labels"], dtype=np.int64).reshape(-1, len(SENT_LABELS))
    kind = row["kind"]
    if kind != "answerable" and kind not in NEGATIVE_KINDS:
        return []
    golds = corpus_example.golds if corpus_example is not None else []
    sents = np.asarray(v["sents"], dtype=np.float64).reshape(-1, len(columns))
    order = _hardest_first(sents, list(columns))
    q = row["question"]
    verbatim = kind == "written" or (corpus_example is not None and corpus_example.question_type in WRITTEN_TYPES)
    make = lambda i, label, span, source="retrieved": ReaderPair(  # noqa: E731
        row["book"], row["id"], kind, q, texts[i][0], texts[i][1], texts[i][2], label, span, source, verbatim)
    if kind != "answerable":
        picked = _pick(order, NEGATIVES_PER_QUESTION, rng)
        return [make(i, 0, None) for i in picked]
    spans = [a for a in (corpus_example.answer_spans if corpus_example is not None else [])
             if verbatim or a.score >= MIN_ANSWER_SCORE]
    if not spans and not verbatim:
        return []
    stated = {sources[a.doc_id][a.start:a.end] for a in spans} if sources is not None else set()
    answer = np.array([t[0] in stated for t in texts], dtype=bool)
    evidence = labels[:, _col("evidence")] == 1
    positive = answer if spans else evidence
    # a restatement of the gold, or a located evidence sentence that is not the answer sentence,
    # is neither a positive nor a safe negative
    unsure = (labels[:, _col("strict")] == 1) | (labels[:, _col("lenient")] == 1) | (evidence & ~positive)
    out = [make(i, 1, answer_span(texts[i][0], golds)) for i in range(len(texts)) if positive[i]]
    negatives = [i for i in order if not positive[i] and not unsure[i]]
    out += [make(i, 0, None) for i in _pick(negatives, NEGATIVES_PER_QUESTION, rng)]
    if corpus_example is not None and sources is not None:  # answer sentences retrieval missed
        seen = {t[0] for t in texts}
        for s in spans:
            ctx = around(sources[s.doc_id], s.start, s.end)
            if ctx.sentence not in seen:
                seen.add(ctx.sentence)
                out.append(ReaderPair(row["book"], row["id"], kind, q, ctx.sentence, ctx.before, ctx.after, 1,
                                      answer_span(ctx.sentence, golds), "missed", verbatim))
    return out


TRAIN_ON = {  # which pairs a training reads (`--train-on`)
    "written": lambda p: p.written,  # the written sets only: realistic questions, both kinds
    "no-synthetic": lambda p: p.kind not in ("swapped", "borrowed"),  # + GraphRAG-Bench answerable
    "all": lambda p: True,
}


def _hardest_first(sents: np.ndarray, columns: list[str]) -> list[int]:
    """Sentences by how much of the question they and their neighbours hold, with the names
    counted twice (a sentence about the asked character is the hardest negative), plus the
    embedding cosine of their window."""
    if not len(sents):
        return []
    col = columns.index
    hardness = sents[:, col("lex_ctx")] + sents[:, col("names")] + sents[:, col("dense")]
    return [int(i) for i in np.argsort(-hardness, kind="stable")]


def _pick(order: Sequence[int], hardest: int, rng: random.Random) -> list[int]:
    head = list(order[:hardest])
    rest = list(order[hardest:])
    return head + (rng.sample(rest, min(RANDOM_NEGATIVES, len(rest))) if rest else [])


def reader_pairs(features: Path, corpus: Path, repos: Path, books: Iterable[str], seed: int = 0) -> list[ReaderPair]:
    """Every training pair of the given books (deterministic for a seed)."""
    from ..repository import Repository
    from .corpus import read_corpus

    books = list(books)
    examples = {e.id: e for e in read_corpus(corpus) if e.book in books}
    rng = random.Random(seed)
    columns = list(SENTENCE_FEATURES)  # read_tables gives them in this order
    out: list[ReaderPair] = []
    for book in books:
        repo = Repository.open(repos / f"{book}.rag")
        sources = {doc: repo.source_text(doc) for doc in {p.doc_id for p in repo.passages}}
        for row in read_tables(features, [book]):
            out += pairs_for_example(row, examples.get(row["id"]), rng, sources, columns)
    return out
