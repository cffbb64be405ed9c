"""The reader's outputs on the feature tables: what `ask` would read, without running retrieval
again.

    python -m pagerag.train.reader_scores --features F --corpus C --readers OUT --out F/reader
    # F/reader/<book>.jsonl.gz: per example and retrieval variant, for each sentence the reader
    # reads (the first READ_LIMIT of the evidence, as generate.decide reads them): p, the span's
    # margin and offsets, and whether the span is strictly / leniently right

Which reader scores a book: a training book is scored by the fold model that never saw it
(OUT/fold<k>/onnx, pagerag.train.reader), so the decision is fitted on held-out reader scores; a
test book by the final model (the packaged one unless --final names another). A sentence read
twice for one question (both variants hold it) is read once.
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import sys
import time
from pathlib import Path

from .books import TEST_BOOKS, TRAIN_BOOKS
from .features import read_tables
from .stack import inner_folds

READ_LIMIT = 64  # sentences read per question: generate.decide.READ_LIMIT (the latency budget)


def reader_for_book(book: str, readers: Path, final: Path | None) -> Path:
    """The reader model directory that scores `book` (held out for a training book)."""
    from ..read.reader import MODEL_DIR

    if book in TRAIN_BOOKS:
        from .reader import FOLDS

        for k, fold in enumerate(inner_folds(sorted(TRAIN_BOOKS), FOLDS)):
            if book in fold:
                return readers / f"fold{k}" / "onnx"
    return final or MODEL_DIR


def score_book(rows: list[dict], golds: dict[str, list[str]], reader) -> list[dict]:
    from ..evaluate.scoring import lenient_by_recall, strict_match
    from ..read.inputs import Passage

    out = []
    for row in rows:
        question = row["question"]
        cache: dict[tuple[str, str, str], object] = {}
        variants = {}
        for name, v in row["variants"].items():
            texts = [tuple(t) for t in (v.get("texts") or [])[:READ_LIMIT]]
            todo = [t for t in dict.fromkeys(texts) if t not in cache]
            for t, r in zip(todo, reader.read(question, [Passage(*t) for t in todo])):
                cache[t] = r
            reads = [cache[t] for t in texts]
            gold = golds.get(row["id"], [])
            spans = [t[0][r.span[0]:r.span[1]] if r.span else "" for t, r in zip(texts, reads)]
            variants[name] = {"p": [round(r.p, 5) for r in reads], "margin": [round(r.margin, 4) for r in reads],
                              "span": [list(r.span) if r.span else [0, 0] for r in reads],
                              "span_strict": [int(bool(gold) and strict_match(s, gold)) for s in spans],
                              "span_lenient": [int(bool(gold) and lenient_by_recall(s, gold)) for s in spans]}
        out.append({"id": row["id"], "variants": variants})
    return out


def run(features: Path, corpus: Path, readers: Path, out: Path, books: list[str], final: Path | None, log) -> None:
    from ..read.reader import Reader
    from .corpus import read_corpus

    examples = {e.id: e for e in read_corpus(corpus)}
    golds = {i: e.golds for i, e in examples.items()}
    out.mkdir(parents=True, exist_ok=True)
    for book in books:
        target = out / f"{book}.jsonl.gz"
        model = reader_for_book(book, readers, final)
        t0 = time.perf_counter()
        rows = score_book(read_tables(features, [book]), golds, Reader(model))
        tmp = target.with_name(target.name + ".tmp")
        with io.TextIOWrapper(gzip.GzipFile(tmp, "wb", mtime=0), encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")
        tmp.replace(target)
        log(f"{book}: {len(rows)} examples read by {model} [{time.perf_counter() - t0:.0f}s]")


def read_scores(out: Path, books: list[str] | None = None) -> dict[str, dict]:
    """example id -> {variant: reader arrays}."""
    found = {}
    for path in sorted(Path(out).glob("*.jsonl.gz")):
        if books is None or path.name[: -len(".jsonl.gz")] in books:
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        row = json.loads(line)
                        found[row["id"]] = row["variants"]
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pagerag.train.reader_scores", description=__doc__.split("\n")[0])
    ap.add_argument("--features", required=True, type=Path)
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--readers", required=True, type=Path, help="The work folder of python -m pagerag.train.reader.")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--final", type=Path, default=None, help="Reader directory for the test books (default: packaged).")
    ap.add_argument("--books", default="", help="Comma-separated (default: all 20).")
    args = ap.parse_args(argv)
    books = [b for b in args.books.split(",") if b] or sorted(TRAIN_BOOKS + TEST_BOOKS)
    run(args.features, args.corpus, args.readers, args.out, books, args.final,
        log=lambda m: print(m, file=sys.stderr, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
