"""Choose the reader's training recipe on training books only: train on five training books, export
to int8 ONNX as shipped, and measure on a sixth (held out) — the figures of
benchmarks/reader_results.md.

    python benchmarks/reader_recipe.py --features F --corpus C --repos R --work /tmp/recipe \
        [--layers 3] [--train-on written] [--max-pairs 4000] [--epochs 2] [--lr 1e-4] [--head-lr 1e-3] ...

The six books are fixed (all from the 15 training books of pagerag.train.books); their pairs are
made once (WORK/pairs.json, pagerag.train.reader_data) and reused by every recipe. Prints one JSON
line: the recipe, training seconds, and pagerag.train.reader.held_out_report on the held-out book
(sentence AUC, question AUC over every kind of question and over the written sets' alone).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HELD_OUT = "Novel-10146"
TRAINED_ON = ("Novel-2544", "Novel-40700", "Novel-47558", "Novel-8559", "Novel-58553")


def main() -> int:
    from pagerag.train.books import TRAIN_BOOKS
    from pagerag.train.reader import Hyper, capped, export, held_out_report, train
    from pagerag.train.reader_data import TRAIN_ON, ReaderPair, reader_pairs

    d = Hyper()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", required=True, type=Path)
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--repos", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--train-on", choices=sorted(TRAIN_ON), default="all")
    ap.add_argument("--max-pairs", type=int, default=4000)
    ap.add_argument("--layers", type=int, default=d.layers)
    ap.add_argument("--epochs", type=float, default=d.epochs)
    ap.add_argument("--lr", type=float, default=d.lr)
    ap.add_argument("--head-lr", type=float, default=d.head_lr)
    ap.add_argument("--pos-weight", type=float, default=d.pos_weight)
    ap.add_argument("--span-weight", type=float, default=d.span_weight)
    args = ap.parse_args()
    assert set(TRAINED_ON) | {HELD_OUT} <= set(TRAIN_BOOKS)

    cache = args.work / "pairs.json"
    if cache.is_file():
        pairs = [ReaderPair(**row) for row in json.loads(cache.read_text())]
    else:
        pairs = reader_pairs(args.features, args.corpus, args.repos, [HELD_OUT, *TRAINED_ON])
        args.work.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps([p.to_dict() for p in pairs]))
    hyper = Hyper(args.layers, args.epochs, 32, args.lr, args.head_lr, args.pos_weight, args.span_weight)
    chosen = capped([p for p in pairs if p.book != HELD_OUT and TRAIN_ON[args.train_on](p)], args.max_pairs, 0)
    out = args.work / "model"
    t0 = time.perf_counter()
    train(chosen, out, hyper, log=lambda m: print(m, file=sys.stderr))
    seconds = time.perf_counter() - t0
    export(out, out / "onnx", {"books": list(TRAINED_ON)}, log=lambda m: print(m, file=sys.stderr))
    report = held_out_report(out / "onnx", [p for p in pairs if p.book == HELD_OUT])
    print(json.dumps({"recipe": hyper.to_dict() | {"train_on": args.train_on}, "pairs": len(chosen),
                      "train_seconds": round(seconds), **report}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
