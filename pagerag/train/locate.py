"""Where a book repository holds a question's evidence and answer.

GraphRAG-Bench states its evidence in its own words, so a statement is *located* in a passage by
the one rule of `pagerag.evaluate.scoring` (>= 60% of its content words occur in it). Among the
passages that pass, the ones with the best idf-weighted coverage are the evidence passages (a
short statement such as "Mr. Greenman kept the Greenman house." passes in any passage with
"kept" and "house"; weighting by rarity prefers the one naming Greenman). Overlapping neighbours
with the same words tie and are both kept.

Sentence labels come from the project's one sentence splitter over the evidence passages: the
shortest run of at most MAX_WINDOW sentences with the best coverage of the statement; answer
sentences are those (in or beside the evidence passages) holding the gold answer string or most
of its content words.
"""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import cached_property

from ..evaluate.scoring import EVIDENCE_LOCATED, content_words, coverage, located, strict_match, tokens
from ..records import Passage
from ..text.sentences import split_sentences
from .examples import SentenceSpan

MAX_WINDOW = 3  # sentences: a statement paraphrases at most a few consecutive sentences
ANSWER_RECALL = EVIDENCE_LOCATED  # "most of its content words", by the same rule
_TIE = 1e-9
_YES_NO = re.compile(r"^\W*(yes|no)\b", re.IGNORECASE)


@dataclass
class Location:
    """Where one statement is located: `best` rows (evidence passages, book order), every row
    that passes the rule (`passing`), and the best plain coverage of any passage."""

    best: list[int]
    passing: list[int]
    coverage: float


class BookIndex:
    """A repository's passages with their content words, an inverted index and sentences."""

    def __init__(self, passages: list[Passage], sources: dict[str, str]):
        self.passages = passages
        self.sources = sources
        self.row_of = {p.passage_id: i for i, p in enumerate(passages)}
        self.words = [content_words(p.text) for p in passages]
        self.rows_with: dict[str, list[int]] = defaultdict(list)
        for row, words in enumerate(self.words):
            for w in words:
                self.rows_with[w].append(row)
        n = len(passages)
        self.idf = {w: math.log((n + 1) / (len(rows) + 1)) + 1.0 for w, rows in self.rows_with.items()}
        self._sentences: dict[int, list[tuple[int, int]]] = {}

    @classmethod
    def open(cls, repo_path) -> "BookIndex":
        from ..repository import Repository

        repo = Repository.open(repo_path)
        passages = repo.passages
        return cls(passages, {doc: repo.source_text(doc) for doc in dict.fromkeys(p.doc_id for p in passages)})

    # ---------------------------------------------------------------------------------------
    # Passages

    def text_of(self, start: int, end: int, doc_id: str) -> str:
        return self.sources[doc_id][start:end]

    def locate(self, words: frozenset[str]) -> Location:
        """The passages that locate a statement given by its content words."""
        if not words:
            return Location([], [], 0.0)
        hits: Counter[int] = Counter()
        for w in words:
            hits.update(self.rows_with.get(w, ()))
        best_cov = max(hits.values(), default=0) / len(words)
        passing = sorted(r for r, c in hits.items() if located(words, self.words[r]))
        if not passing:
            return Location([], [], best_cov)
        total = sum(self.idf.get(w, 0.0) for w in words) or 1.0
        weighted = {r: sum(self.idf[w] for w in words & self.words[r]) / total for r in passing}
        top = max(weighted.values())
        return Location([r for r in passing if weighted[r] >= top - _TIE], passing, best_cov)

    def covering(self, words: frozenset[str], share: float) -> list[int]:
        """Rows holding at least `share` of the content words (book order)."""
        if not words:
            return []
        hits: Counter[int] = Counter()
        for w in words:
            hits.update(self.rows_with.get(w, ()))
        need = share * len(words) - _TIE
        return sorted(r for r, c in hits.items() if c >= need)

    def located_anywhere(self, words: frozenset[str], hidden: set[int]) -> list[int]:
        """Rows outside `hidden` that still locate the statement."""
        return [r for r in self.locate(words).passing if r not in hidden]

    @cached_property
    def _by_position(self) -> dict[tuple[str, int], int]:
        return {(p.doc_id, p.ordinal): i for i, p in enumerate(self.passages)}

    def overlapping(self, row: int) -> list[int]:
        """The passages of the same document whose text overlaps this one (chunks overlap)."""
        p = self.passages[row]
        out = []
        for step in (-2, -1, 1, 2):
            other = self._by_position.get((p.doc_id, p.ordinal + step))
            if other is not None:
                q = self.passages[other]
                if q.start < p.end and p.start < q.end:
                    out.append(other)
        return out

    # ---------------------------------------------------------------------------------------
    # Sentences

    def sentences(self, row: int) -> list[tuple[int, int]]:
        if row not in self._sentences:
            p = self.passages[row]
            self._sentences[row] = split_sentences(self.sources[p.doc_id], p.start, p.end)
        return self._sentences[row]

    def evidence_sentences(self, statement: int, words: frozenset[str], rows: list[int]) -> list[SentenceSpan]:
        """Per evidence passage, the shortest run of <= MAX_WINDOW sentences with the best
        coverage of the statement; one span per sentence, each scored by its run's coverage."""
        spans: dict[tuple[str, int, int], SentenceSpan] = {}
        for row in rows:
            p = self.passages[row]
            for start, end, cov in self._best_window(row, words):
                key = (p.doc_id, start, end)
                spans.setdefault(key, SentenceSpan(p.doc_id, start, end, p.passage_id, statement, round(cov, 4)))
        return sorted(spans.values(), key=lambda s: (s.doc_id, s.start))

    def _best_window(self, row: int, words: frozenset[str]) -> list[tuple[int, int, float]]:
        p = self.passages[row]
        sents = self.sentences(row)
        sent_words = [content_words(self.sources[p.doc_id][s:e]) for s, e in sents]
        best: tuple[float, int, int] | None = None  # (coverage, -length, -first) -> max
        for i in range(len(sents)):
            union: frozenset[str] = frozenset()
            for j in range(i, min(i + MAX_WINDOW, len(sents))):
                union |= sent_words[j]
                key = (coverage(words, union), -(j - i), -i)
                if best is None or key > best:
                    best = key
        if best is None or best[0] == 0.0:
            return []
        cov, neg_len, neg_first = best
        first = -neg_first
        return [(s, e, cov) for s, e in sents[first: first + 1 - neg_len]]

    def answer_sentences(self, answer: str, rows: list[int]) -> list[SentenceSpan]:
        """Sentences of the given passages and their overlapping neighbours that hold the gold
        answer: its normalised string (score 1.0), or, for an answer of two or more content words,
        at least ANSWER_RECALL of them. Yes/no answers have no answer sentence."""
        if not answer_is_stated(answer):
            return []
        words = content_words(answer)
        region = sorted(set(rows) | {n for r in rows for n in self.overlapping(r)})
        spans: dict[tuple[str, int, int], SentenceSpan] = {}
        for row in region:
            p = self.passages[row]
            for start, end in self.sentences(row):
                if (p.doc_id, start, end) in spans:
                    continue
                score = answer_score(answer, words, self.sources[p.doc_id][start:end])
                if score is not None:
                    spans[(p.doc_id, start, end)] = SentenceSpan(p.doc_id, start, end, p.passage_id, -1, score)
        return sorted(spans.values(), key=lambda s: (s.doc_id, s.start))


def answer_is_stated(answer: str) -> bool:
    """A gold answer that a sentence can state: not yes/no, with at least one content word."""
    return bool(content_words(answer)) and not _YES_NO.match(answer or "")


def answer_score(answer: str, words: frozenset[str], sentence: str) -> float | None:
    """1.0 when the sentence holds the normalised answer, else its content-word coverage when
    that reaches ANSWER_RECALL (answers of two or more content words), else None."""
    if tokens(answer) and strict_match(sentence, [answer]):
        return 1.0
    if len(words) >= 2:
        cov = coverage(words, content_words(sentence))
        if cov >= ANSWER_RECALL:
            return round(cov, 4)
    return None
