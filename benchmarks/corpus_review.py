"""Print a fixed-seed sample of corpus negatives with what retrieval still finds, for checking
by hand whether the book (with the mask applied) really no longer answers them.

    python benchmarks/corpus_review.py --corpus corpus-out/book_corpus.jsonl --repos /work/repos \\
        --kind masked --n 40 --split train [--seed 0] [--show 6] [--pipeline full]

Per example: the question, the gold answer of its source question, the evidence statements,
the mask, and the best `--show` evidence spans of `retrieve(..., exclude=mask)` (the same
pipeline `pagerag ask` uses), each with the best coverage of any evidence statement and whether
it holds the gold answer. A checking aid for the corpus rules (benchmarks/corpus_results.md); no
shipped model is made with it.
"""
from __future__ import annotations

import argparse
import random
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pagerag.evaluate.scoring import content_words, coverage  # noqa: E402
from pagerag.train.corpus import read_corpus  # noqa: E402
from pagerag.train.examples import CorpusExample  # noqa: E402
from pagerag.train.locate import BookIndex, answer_is_stated, answer_score  # noqa: E402
from pagerag.train.mask import question_names  # noqa: E402


def sample(examples: list[CorpusExample], kind: str, split: str, n: int, seed: int,
           skip: frozenset[str] = frozenset()) -> list[CorpusExample]:
    """`n` examples of one kind and split, drawn with `seed` from those not in `skip` (by source
    question id, so a fresh sample after a rule change never repeats a checked question)."""
    pool = sorted((e for e in examples if e.kind == kind and e.split == split and e.source_id not in skip),
                  key=lambda e: e.id)
    return random.Random(seed).sample(pool, min(n, len(pool)))


def review(ex: CorpusExample, repos: Path, settings, encode, show: int) -> str:
    from pagerag.retrieve.api import retrieve

    r = retrieve(ex.question, repos / f"{ex.book}.rag", settings, encode=encode, exclude=set(ex.mask_passage_ids))
    words = [content_words(s) for s in ex.evidence]
    answer_words = content_words(ex.answer)
    lines = [f"== {ex.id} [{ex.kind}, {ex.question_type}, {ex.book}]", f"Q: {ex.question}", f"gold: {ex.answer}"]
    if ex.swap:
        lines.append(f"swap: {ex.swap.from_name} -> {ex.swap.to_name}")
    lines += [f"evidence[{i}]: {s}" for i, s in enumerate(ex.evidence)]
    lines.append(f"mask: {len(ex.mask_passage_ids)} passages")
    lines += answer_elsewhere(ex, repos)
    for ev in r.evidence[:show]:
        ev_words = content_words(ev.text)
        cov = max((coverage(w, ev_words) for w in words), default=0.0)
        holds = answer_score(ex.answer, answer_words, ev.text) is not None
        lines.append(f"  -- {ev.passage_id} cov={cov:.2f} answer={'yes' if holds else 'no'}")
        lines.append(textwrap.indent(textwrap.fill(" ".join(ev.text.split()), 110), "     "))
    return "\n".join(lines)


def answer_elsewhere(ex: CorpusExample, repos: Path, limit: int = 3) -> list[str]:
    """Unhidden passages that hold the gold answer and name something the question names."""
    if not answer_is_stated(ex.answer):
        return []
    index = _index(repos / f"{ex.book}.rag")
    hidden, names = set(ex.mask_passage_ids), question_names(ex.question)
    words = content_words(ex.answer)
    found = [p for p in index.passages if p.passage_id not in hidden and any(n in p.text for n in names)
             and answer_score(ex.answer, words, p.text) is not None]
    out = [f"answer+name in {len(found)} unhidden passages"]
    for p in found[:limit]:
        out.append(textwrap.indent(textwrap.fill(f"{p.passage_id}: " + " ".join(p.text.split()), 110), "     ~ "))
    return out


_INDEXES: dict = {}


def _index(path: Path):
    if path not in _INDEXES:
        _INDEXES[path] = BookIndex.open(path)
    return _INDEXES[path]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/corpus_review.py", description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--repos", required=True)
    ap.add_argument("--kind", default="masked", choices=("masked", "swapped", "answerable"))
    ap.add_argument("--split", default="train", choices=("train", "test"))
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=6)
    ap.add_argument("--pipeline", default="full")
    ap.add_argument("--skip", default="", help="File of question ids already checked (one per line).")
    args = ap.parse_args(argv)
    skip = frozenset(Path(args.skip).read_text().split()) if args.skip else frozenset()
    from pagerag.retrieve.api import get_encoder
    from pagerag.settings import load_settings

    settings = load_settings(pipeline=args.pipeline)
    encode = get_encoder(settings)
    examples = read_corpus(Path(args.corpus))
    for i, ex in enumerate(sample(examples, args.kind, args.split, args.n, args.seed, skip), 1):
        print(f"\n#{i}", review(ex, Path(args.repos), settings, encode, args.show), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
