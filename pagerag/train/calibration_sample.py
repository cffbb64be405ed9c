"""The calibration sample `pagerag calibrate --llm BACKEND` fits an LLM's decision on, made from the
training books and shipped in the package.

    python -m pagerag.train.calibration_sample --corpus C --repos R --readers READERS \\
        --held-out FIT_OUT/held_out_p.jsonl [--per-book 20] [--out pagerag/generate/models/calibration_sample.jsonl.gz]

Per training book, `--per-book` questions with a fixed seed: half answerable (evidence located),
half unanswerable (the book's written ones first, then masked, swapped and borrowed in turn).
Each row holds what the LLM judge would read at question time: the question, the excerpts
(`generate.decide.llm_excerpts`, ordered by a reader that never saw the book:
pagerag.train.reader's fold model) cut to `generate.judge_context_tokens`, and the graph context
drawn from them; beside them the reader model's held-out P(sufficient) (pagerag.train.fit, models
that never saw the book) and the label (the retrieved evidence supports an answer). No LLM is
called here: the user's LLM is, by `pagerag calibrate --llm`.
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
from .corpus import read_corpus
from .examples import CorpusExample

NEGATIVE_ORDER = ("written", "masked", "swapped", "borrowed")


def choose(examples: list[CorpusExample], per_book: int, seed: int = 0) -> list[CorpusExample]:
    rng = random.Random(seed)
    by_book: dict[str, dict[str, list[CorpusExample]]] = defaultdict(lambda: defaultdict(list))
    for e in sorted(examples, key=lambda e: e.id):
        if e.book in TRAIN_BOOKS and (e.kind != "answerable" or e.located):
            by_book[e.book][e.kind].append(e)
    out: list[CorpusExample] = []
    for book in sorted(by_book):
        kinds = by_book[book]
        for pool in kinds.values():
            rng.shuffle(pool)
        half = per_book // 2
        out += kinds["answerable"][:half]
        written = kinds["written"][: (per_book - half) // 2]
        others = [list(kinds[k]) for k in NEGATIVE_ORDER[1:]]
        negatives = list(written)
        while len(negatives) < per_book - half and any(others):
            for pool in others:
                if pool and len(negatives) < per_book - half:
                    negatives.append(pool.pop(0))
        out += negatives
    return out


def row_for(ex: CorpusExample, rag, reader, held_p: dict[str, float]) -> dict | None:
    from ..generate.decide import Session, graph_context_for, llm_excerpts, read_ranked
    from ..generate.sufficiency import judge_excerpts
    from .features import example_labels

    if ex.id not in held_p:
        return None
    pipe = Session(rag.settings, rag.state, rag.encode, None, reader)
    retrieval = rag.retrieve(ex.question, exclude=set(ex.mask_passage_ids))
    reading, ranked = read_ranked(retrieval, pipe)
    shown = judge_excerpts(llm_excerpts(reading, ranked, pipe), rag.settings.generate.judge_context_tokens)
    label = example_labels(ex, retrieval.evidence)["suff"]
    keep = ("passage_id", "doc_id", "file", "start", "end", "text", "n", "n_tokens", "line", "score")
    return {"id": ex.id, "book": ex.book, "kind": ex.kind, "question": ex.question,
            "excerpts": [{k: getattr(e, k) for k in keep} | {"file": Path(e.file).name} for e in shown],
            "graph_context": graph_context_for(retrieval.hints, shown, rag.settings),
            "suff_p": held_p[ex.id], "label": label}


def run(corpus: Path, repos: Path, readers: Path, held_out: Path, out: Path, per_book: int, log) -> int:
    from ..api import PageRAG
    from ..read import Reader
    from .reader_scores import reader_for_book

    held_p = {r["id"]: float(r["p"]) for r in map(json.loads, held_out.read_text().splitlines()) if r.get("p") is not None}
    chosen = choose(read_corpus(corpus), per_book)
    rows = []
    for book in sorted({e.book for e in chosen}):
        rag = PageRAG(repos / f"{book}.rag", llm="extractive")
        reader = Reader(reader_for_book(book, readers, None))
        made = [r for e in chosen if e.book == book if (r := row_for(e, rag, reader, held_p)) is not None]
        rows += made
        log(f"{book}: {len(made)} rows")
    out.parent.mkdir(parents=True, exist_ok=True)
    with io.TextIOWrapper(gzip.GzipFile(out, "wb", mtime=0), encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    from ..generate.models import CALIBRATION_SAMPLE

    ap = argparse.ArgumentParser(prog="python -m pagerag.train.calibration_sample", description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--repos", required=True, type=Path)
    ap.add_argument("--readers", required=True, type=Path, help="The work folder of python -m pagerag.train.reader.")
    ap.add_argument("--held-out", required=True, type=Path, help="held_out_p.jsonl written by python -m pagerag.train.fit.")
    ap.add_argument("--per-book", type=int, default=20)
    ap.add_argument("--out", type=Path, default=CALIBRATION_SAMPLE)
    args = ap.parse_args(argv)
    n = run(args.corpus, args.repos, args.readers, args.held_out, args.out, args.per_book,
            log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"{n} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
