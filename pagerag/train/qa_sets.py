"""The written question sets of the training books (`$PAGERAG_DATA_DIR/qa/train/<book>.qa.jsonl`)
as corpus examples, beside the GraphRAG-Bench ones.

Each set holds, per training book, 30 answerable questions (fact, relational, multi-hop, global)
whose evidence is quoted verbatim, and 20 unanswerable ones written by reading the book: real
people, places and things of the book, asked about a detail it never gives. They are the
realistic negatives the synthetic kinds (masked, swapped, borrowed) only approximate.

    answerable  kind "answerable", question_type the set's type; every evidence quote is found in
                the repository's source (runs of whitespace collapsed, as the sets define it) and
                its sentences are the evidence spans (score 1.0); answer spans are the sentences
                of the quotes' passages that hold a gold answer or alias (locate.answer_score)
    written     kind "written": an unanswerable question, no evidence, no answer

A quote that is not found verbatim (the repository normalises its text) is located like a
GraphRAG-Bench statement, by its content words.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..evaluate.scoring import content_words
from .examples import CorpusExample, SentenceSpan
from .locate import BookIndex, answer_is_stated, answer_score

QA_DIR = Path("qa") / "train"  # under PAGERAG_DATA_DIR
_SPACE = re.compile(r"\s+")


def qa_file(data_dir: Path, book: str) -> Path:
    return Path(data_dir) / QA_DIR / f"{book}.qa.jsonl"


def read_qa(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


class Collapsed:
    """A document's text with runs of whitespace collapsed to one space, and the way back to
    the original offsets."""

    def __init__(self, text: str):
        out: list[str] = []
        origin: list[int] = []
        space = False
        for i, ch in enumerate(text):
            if ch.isspace():
                if not space and out:
                    out.append(" ")
                    origin.append(i)
                space = True
                continue
            space = False
            out.append(ch)
            origin.append(i)
        self.text = "".join(out)
        self.origin = origin

    def find(self, quote: str) -> tuple[int, int] | None:
        """(start, end) in the original text of the first occurrence of `quote`, or None."""
        needle = _SPACE.sub(" ", quote).strip()
        at = self.text.find(needle) if needle else -1
        if at < 0:
            return None
        return self.origin[at], self.origin[at + len(needle) - 1] + 1


def qa_examples(book: str, split: str, rows: list[dict], index: BookIndex) -> list[CorpusExample]:
    """The set's questions as corpus examples (answerable and written), in file order."""
    collapsed = {doc: Collapsed(text) for doc, text in index.sources.items()}
    out = []
    for row in rows:
        if row.get("answerable"):
            out.append(_answerable(book, split, row, index, collapsed))
        else:
            out.append(CorpusExample(
                id=row["id"], book=book, split=split, kind="written", question=row["question"], answer="",
                question_type=str(row.get("type") or "unanswerable"), source_id=row["id"], evidence=[],
                evidence_passage_ids=[], evidence_coverage=[]))
    return out


def _answerable(book: str, split: str, row: dict, index: BookIndex, collapsed: dict[str, Collapsed]) -> CorpusExample:
    answers = [a for a in row.get("answers", []) if a.strip()]
    quotes = [q for q in row.get("evidence", []) if q.strip()]
    passage_ids: list[list[str]] = []
    coverage: list[float] = []
    evidence_spans: list[SentenceSpan] = []
    rows_used: set[int] = set()
    for i, quote in enumerate(quotes):
        spans, rows = _quote_sentences(i, quote, index, collapsed)
        if not spans:  # not verbatim in the repository's text: locate it by its content words
            words = content_words(quote)
            loc = index.locate(words)
            rows = loc.best
            spans = index.evidence_sentences(i, words, rows)
            coverage.append(round(loc.coverage, 4))
        else:
            coverage.append(1.0)
        passage_ids.append([index.passages[r].passage_id for r in rows])
        evidence_spans.extend(spans)
        rows_used.update(rows)
    return CorpusExample(
        id=row["id"], book=book, split=split, kind="answerable", question=row["question"],
        answer=answers[0] if answers else "", aliases=answers[1:], question_type=str(row.get("type") or "fact"),
        source_id=row["id"], evidence=quotes, evidence_passage_ids=passage_ids, evidence_coverage=coverage,
        evidence_spans=sorted(set(evidence_spans), key=lambda s: (s.doc_id, s.start, s.end)),
        answer_spans=_answer_spans(answers, evidence_spans, index, sorted(rows_used)))


def _quote_sentences(statement: int, quote: str, index: BookIndex,
                     collapsed: dict[str, Collapsed]) -> tuple[list[SentenceSpan], list[int]]:
    """The sentences a verbatim quote overlaps (score 1.0) and the passages holding it whole (else
    the ones it overlaps most)."""
    for doc, text in collapsed.items():
        found = text.find(quote)
        if found is None:
            continue
        qs, qe = found
        rows = [r for r, p in enumerate(index.passages) if p.doc_id == doc and p.start < qe and qs < p.end]
        whole = [r for r in rows if index.passages[r].start <= qs and qe <= index.passages[r].end]
        spans: dict[tuple[int, int], SentenceSpan] = {}
        for r in rows:
            p = index.passages[r]
            for s, e in index.sentences(r):
                if s < qe and qs < e and (s, e) not in spans:
                    spans[(s, e)] = SentenceSpan(doc, s, e, p.passage_id, statement, 1.0)
        return list(spans.values()), whole or rows
    return [], []


def _answer_spans(answers: list[str], evidence: list[SentenceSpan], index: BookIndex, rows: list[int]) -> list[SentenceSpan]:
    """The evidence sentences that hold a gold answer or alias; when none does, the sentences of the
    quotes' passages that do (an answer stated beside the quote)."""
    stated = [a for a in answers if answer_is_stated(a)]
    if not stated:
        return []
    words = {a: content_words(a) for a in stated}

    def score(text: str) -> float | None:
        found = [s for a in stated if (s := answer_score(a, words[a], text)) is not None]
        return max(found) if found else None

    out = [SentenceSpan(s.doc_id, s.start, s.end, s.passage_id, -1, sc) for s in evidence
           if (sc := score(index.sources[s.doc_id][s.start:s.end])) is not None]
    if out:
        return sorted(set(out), key=lambda s: (s.doc_id, s.start))
    seen: dict[tuple[str, int, int], SentenceSpan] = {}
    for r in rows:
        p = index.passages[r]
        for s, e in index.sentences(r):
            sc = score(index.sources[p.doc_id][s:e])
            if sc == 1.0 and (p.doc_id, s, e) not in seen:  # beside the quote: only an exact answer string
                seen[(p.doc_id, s, e)] = SentenceSpan(p.doc_id, s, e, p.passage_id, -1, sc)
    return sorted(seen.values(), key=lambda s: (s.doc_id, s.start))
