"""The records of the book training corpus (one JSON line per example).

An example names passages by id and sentences by absolute offsets into the repository's source
text (`sources/<doc_id>.txt`, like `Passage.start/end`), so a later script can open the book's
repository, run retrieval with `exclude=set(mask_passage_ids)`, and compute features and labels
without this package.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

KINDS = ("answerable", "masked", "swapped", "borrowed", "written")


@dataclass(frozen=True)
class SentenceSpan:
    """One sentence of the source: text[start:end] of document `doc_id`, found in `passage_id`
    (a sentence in the overlap of two passages is named once, by the first). `statement` is the
    index of the evidence statement it holds (-1 for an answer sentence); `score` is the share of
    the statement's (or answer's) content words it holds, 1.0 for an exact answer string."""

    doc_id: str
    start: int
    end: int
    passage_id: str
    statement: int
    score: float


@dataclass(frozen=True)
class Swap:
    """A swapped negative: the question's character `from_name` replaced by `to_name`, another
    character of the same book (graph entity ids given for both)."""

    from_name: str
    to_name: str
    from_entity: str
    to_entity: str


@dataclass
class CorpusExample:
    """One question of a book, answerable or made unanswerable.

    kind: answerable (the GraphRAG-Bench question as is), masked (the same question, but the
    passages in `mask_passage_ids` are hidden at question time: the book no longer holds its
    evidence, so it must be refused), swapped (a character's name replaced by another one's; the
    book never states the altered evidence, so it must be refused; nothing is masked), borrowed
    (another training book's question about one character, asked about a character of this book
    that the book does not support: pagerag.train.borrow; no evidence; `swap.from_entity` is
    "<source book>:<entity id>"), written (an unanswerable question of the book's written set,
    qa/train: pagerag.train.qa_sets; no evidence).
    `answer` is the gold answer of the source question (for a negative it is what must NOT be
    answered; "" for a written one), `aliases` the other accepted answers (written sets only). `evidence` holds the statements as asked (swapped: with the
    new name); `evidence_passage_ids[i]` the passages that locate statement i (>= 60% of its
    content words, best idf-weighted coverage, ties kept), `evidence_coverage[i]` that coverage.
    """

    id: str
    book: str
    split: str  # train | test (by book)
    kind: str  # answerable | masked | swapped | borrowed
    question: str
    answer: str
    question_type: str
    source_id: str  # the GraphRAG-Bench question id it comes from
    evidence: list[str]
    evidence_passage_ids: list[list[str]]
    evidence_coverage: list[float]
    mask_passage_ids: list[str] = field(default_factory=list)
    evidence_spans: list[SentenceSpan] = field(default_factory=list)
    answer_spans: list[SentenceSpan] = field(default_factory=list)
    swap: Swap | None = None
    aliases: list[str] = field(default_factory=list)

    @property
    def golds(self) -> list[str]:
        """The gold answer and its aliases (what strict and lenient scoring accept)."""
        return [a for a in [self.answer, *self.aliases] if a]

    @property
    def answerable(self) -> bool:
        return self.kind == "answerable"

    @property
    def located(self) -> bool:
        """Every evidence statement is located in at least one passage."""
        return bool(self.evidence) and all(self.evidence_passage_ids)

    @property
    def gold_passage_ids(self) -> list[str]:
        """All passages that locate some statement, in first-seen order."""
        return list(dict.fromkeys(p for ids in self.evidence_passage_ids for p in ids))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["answerable"] = self.answerable
        return out

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> "CorpusExample":
        row = {k: v for k, v in row.items() if k != "answerable"}
        row["evidence_spans"] = [SentenceSpan(**s) for s in row.get("evidence_spans", [])]
        row["answer_spans"] = [SentenceSpan(**s) for s in row.get("answer_spans", [])]
        row["swap"] = Swap(**row["swap"]) if row.get("swap") else None
        return cls(**row)
