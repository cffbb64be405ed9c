"""Print a fixed-seed sample of corpus negatives with what retrieval still finds, for checking
by hand whether the book (with the mask applied) really no longer answers them.

    python -m pagerag.train.review --corpus corpus-out/book_corpus.jsonl --repos /work/repos \\
        --kind masked --n 40 --split train [--seed 0] [--show 6] [--pipeline full]

Per example: the question, the gold answer of its source question, the evidence statements,
the mask, and the best `--show` evidence spans of `retrieve(..., exclude=mask)` (the same
pipeline `pagerag ask` uses), each with the best coverage of any evidence statement and whether
it holds the gold answer.
"""
from __future__ import annotations

import argparse
import random
import sys
import textwrap
from pathlib import Path

from ..evaluate.scoring import content_words, coverage
from .corpus import read_corpus
from .locate import answer_score
from .records import CorpusExample


def sample(examples: list[CorpusExample], kind: str, split: str, n: int, seed: int) -> list[CorpusExample]:
    pool = sorted((e for e in examples if e.kind == kind and e.split == split), key=lambda e: e.id)
    return random.Random(seed).sample(pool, min(n, len(pool)))


def review(ex: CorpusExample, repos: Path, settings, encode, show: int) -> str:
    from ..retrieve.api import retrieve

    r = retrieve(ex.question, repos / f"{ex.book}.rag", settings, encode=encode, exclude=set(ex.mask_passage_ids))
    words = [content_words(s) for s in ex.evidence]
    answer_words = content_words(ex.answer)
    lines = [f"== {ex.id} [{ex.kind}, {ex.question_type}, {ex.book}]", f"Q: {ex.question}", f"gold: {ex.answer}"]
    if ex.swap:
        lines.append(f"swap: {ex.swap.from_name} -> {ex.swap.to_name}")
    lines += [f"evidence[{i}]: {s}" for i, s in enumerate(ex.evidence)]
    lines.append(f"mask: {len(ex.mask_passage_ids)} passages")
    for ev in r.evidence[:show]:
        ev_words = content_words(ev.text)
        cov = max((coverage(w, ev_words) for w in words), default=0.0)
        holds = answer_score(ex.answer, answer_words, ev.text) is not None
        lines.append(f"  -- {ev.passage_id} cov={cov:.2f} answer={'yes' if holds else 'no'}")
        lines.append(textwrap.indent(textwrap.fill(" ".join(ev.text.split()), 110), "     "))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pagerag.train.review", description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--repos", required=True)
    ap.add_argument("--kind", default="masked", choices=("masked", "swapped", "answerable"))
    ap.add_argument("--split", default="train", choices=("train", "test"))
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=6)
    ap.add_argument("--pipeline", default="full")
    args = ap.parse_args(argv)
    from ..retrieve.api import get_encoder
    from ..settings import load_settings

    settings = load_settings(pipeline=args.pipeline)
    encode = get_encoder(settings)
    for i, ex in enumerate(sample(read_corpus(Path(args.corpus)), args.kind, args.split, args.n, args.seed), 1):
        print(f"\n#{i}", review(ex, Path(args.repos), settings, encode, args.show), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
