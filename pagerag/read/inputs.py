"""What the reader reads: one (question, sentence in its context) pair as word pieces.

The one encoding of a pair, used by training (pagerag.train.reader) and at question time
(reader.py), so the model always scores what it was fitted on:

    [CLS] question [SEP] before sentence after [SEP]
    token types  0 ... 0 0 | 0 ... 0  1 ... 1  0 ... 0 | 0

The sentence is read in its place in the book: `before` is the end of the text before it (a
pronoun's referent is usually there) and `after` the start of the text after it, each cut to a
few word pieces. Token type 1 marks the sentence itself, the only tokens an answer span may
cover; the [CLS] position stands for "no answer here" (SQuAD 2.0).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

# Characters of book text taken on each side before tokenising (more than the word-piece limits
# below ever need).
BEFORE_CHARS = 300
AFTER_CHARS = 160


@dataclass(frozen=True)
class Limits:
    """Word pieces per part of a pair (the sentence is cut at its end when longer)."""

    question: int = 40
    sentence: int = 80
    before: int = 32
    after: int = 16

    def to_dict(self) -> dict[str, int]:
        return {"question": self.question, "sentence": self.sentence, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class Passage:
    """One sentence to read: its text and the book text around it."""

    sentence: str
    before: str = ""
    after: str = ""


@dataclass
class Pair:
    """One encoded pair. `offsets[i]` is the (start, end) in the sentence text of word piece
    `first + i`; pieces outside the sentence have none."""

    ids: list[int]
    type_ids: list[int]
    first: int
    offsets: list[tuple[int, int]]

    @property
    def last(self) -> int:
        return self.first + len(self.offsets) - 1


def around(source: str, start: int, end: int) -> Passage:
    """The sentence source[start:end] with the book text around it."""
    return Passage(source[start:end], source[max(0, start - BEFORE_CHARS):start], source[end:end + AFTER_CHARS])


class PairEncoder:
    """Encodes pairs with the model's own tokenizer.json (`tokenizers`, no torch)."""

    def __init__(self, tokenizer_file: Path, limits: Limits = Limits()):
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        self.limits = limits
        self.cls = self.tokenizer.token_to_id("[CLS]")
        self.sep = self.tokenizer.token_to_id("[SEP]")
        self.pad = self.tokenizer.token_to_id("[PAD]") or 0

    def encode(self, question: str, passages: Sequence[Passage]) -> list[Pair]:
        if not passages:
            return []
        lim = self.limits
        q = self.tokenizer.encode(question, add_special_tokens=False).ids[: lim.question]
        texts = [p.sentence for p in passages] + [p.before for p in passages] + [p.after for p in passages]
        enc = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        n = len(passages)
        out = []
        for i in range(n):
            sent, before, after = enc[i], enc[n + i].ids[-lim.before:] if lim.before else [], enc[2 * n + i].ids[: lim.after]
            s_ids, s_off = sent.ids[: lim.sentence], [tuple(o) for o in sent.offsets[: lim.sentence]]
            head = [self.cls, *q, self.sep]
            ids = head + list(before) + s_ids + list(after) + [self.sep]
            first = len(head) + len(before)
            type_ids = [0] * first + [1] * len(s_ids) + [0] * (len(after) + 1)
            out.append(Pair(ids, type_ids, first, s_off))
        return out


def batch_arrays(pairs: Sequence[Pair], pad: int = 0):
    """input_ids, attention_mask, token_type_ids (int64, padded to the longest pair)."""
    import numpy as np

    width = max(len(p.ids) for p in pairs)
    ids = np.full((len(pairs), width), pad, dtype=np.int64)
    mask = np.zeros((len(pairs), width), dtype=np.int64)
    types = np.zeros((len(pairs), width), dtype=np.int64)
    for row, p in enumerate(pairs):
        ids[row, : len(p.ids)] = p.ids
        mask[row, : len(p.ids)] = 1
        types[row, : len(p.ids)] = p.type_ids
    return ids, mask, types
