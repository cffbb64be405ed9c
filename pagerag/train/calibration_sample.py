"""The calibration sample `pagerag calibrate --llm BACKEND` fits an LLM judge's threshold on: pairs
from the training books, shipped in the package.

    python -m pagerag.train.pairs --books train --out PAIRS
    python benchmarks/pair_qa.py build --pairs PAIRS --repos PREPOS
    python -m pagerag.train.calibration_sample --pairs PAIRS --repos PREPOS \\
        [--out pagerag/generate/models/calibration_pairs.jsonl.gz]

One row per pair (pagerag.train.pairs: inserted answers and cut answers of the 15 training
books): the question and, for the book that states its answer (`says`) and the one that does not
(`silent`), the excerpts the judge reads at question time (generate.window_judge, the default
retrieval, MAX_EXCERPTS of them). Rows interleave the books (a fixed seed), so `calibrate --limit
N` takes pairs from every book. No LLM is called here: the user's LLM is, by `pagerag calibrate`.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

from .books import TRAIN_BOOKS
from .pairs import Pair, read_pairs

MAX_EXCERPTS = 6
KEEP = ("passage_id", "doc_id", "file", "start", "end", "text", "n", "n_tokens", "line", "score")


def judge_view(rag, question: str) -> list[dict]:
    """The excerpts the LLM judge would read for `question` in `rag`, as dicts."""
    from ..generate.sentences import read_evidence
    from ..generate.window_judge import judge_excerpts_of

    retrieval = rag.retrieve(question)
    reading = read_evidence(retrieval.question, retrieval.evidence, rag.state, rag.settings.embed.model, rag.encode)
    excerpts = judge_excerpts_of(reading, rag.state, MAX_EXCERPTS, rag.settings.chunk.encoding)
    return [{k: getattr(e, k) for k in KEEP} | {"file": Path(e.file).name} for e in excerpts]


def interleave(pairs: list[Pair], seed: int = 0) -> list[Pair]:
    """Pairs shuffled within each book, then taken a book at a time in turn."""
    rng = random.Random(seed)
    by_book: dict[str, list[Pair]] = defaultdict(list)
    for p in sorted(pairs, key=lambda p: p.id):
        by_book[p.book].append(p)
    for pool in by_book.values():
        rng.shuffle(pool)
    out, books = [], sorted(by_book)
    while any(by_book[b] for b in books):
        for b in books:
            if by_book[b]:
                out.append(by_book[b].pop(0))
    return out


def run(pairs_dir: Path, repos: Path, out: Path, log) -> int:
    from ..api import PageRAG

    pairs = [p for p in read_pairs(pairs_dir) if p.book in TRAIN_BOOKS]
    views: dict[tuple[str, str], list[dict]] = {}
    for (book, side) in sorted({(p.book, s) for p in pairs for s in (p.says, p.silent)}):
        rag = PageRAG(repos / book / f"{side}.rag", llm="extractive")
        for p in pairs:
            if p.book == book and side in (p.says, p.silent):
                views[(p.id, side)] = judge_view(rag, p.question)
        log(f"{book}/{side}: read")
    rows = [{"pair": p.id, "book": p.book, "kind": p.kind, "question": p.question, "answers": p.answers,
             "says": views[(p.id, p.says)], "silent": views[(p.id, p.silent)]} for p in interleave(pairs)]
    out.parent.mkdir(parents=True, exist_ok=True)
    with io.TextIOWrapper(gzip.GzipFile(out, "wb", mtime=0), encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    from ..generate.models import CALIBRATION_SAMPLE

    ap = argparse.ArgumentParser(prog="python -m pagerag.train.calibration_sample", description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", required=True, type=Path, help="The pairs folder of python -m pagerag.train.pairs.")
    ap.add_argument("--repos", required=True, type=Path, help="Their repositories (benchmarks/pair_qa.py build).")
    ap.add_argument("--out", type=Path, default=CALIBRATION_SAMPLE)
    args = ap.parse_args(argv)
    n = run(args.pairs, args.repos, args.out, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"{n} pairs -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
