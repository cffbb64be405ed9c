"""A reader taught by pairs (experiment): the same question's sentences on the side that says
(those holding a gold string: positives) and on the silent side (negatives), so the label can
only come from the text. Trained in 3 folds of the training books (each book's pairs scored by a
model that never saw the book) and once on all 15; the table's sentences get `p_pair` (and
`margin_pair`) from the model that did not see their book (DEV/test tables: the final model).

    python benchmarks/pair_reader.py --table TRAIN.jsonl --out WORK [--score DEV.jsonl TEST.jsonl]
    python benchmarks/pair_decide.py --table WORK/TRAIN.scored.jsonl --key p_pair --report ...
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from pagerag.train.books import TRAIN_BOOKS  # noqa: E402
from pagerag.train.reader import Hyper, export, train  # noqa: E402
from pagerag.train.reader_data import ReaderPair, answer_span  # noqa: E402
from pagerag.train.stack import inner_folds  # noqa: E402

HARD_PER_SIDE = 3  # the shipped reader's highest-P non-gold sentences of each side
RANDOM_PER_SIDE = 1


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8")]


def reader_pairs(rows: list[dict], seed: int = 0) -> list[ReaderPair]:
    rng = random.Random(seed)
    out = []
    for r in rows:
        sents = r["sentences"]
        gold = [s for s in sents if s["gold"]]
        rest = sorted((s for s in sents if not s["gold"]), key=lambda s: -s["p"])
        negatives = rest[:HARD_PER_SIDE] + rng.sample(rest[HARD_PER_SIDE:], min(RANDOM_PER_SIDE, len(rest[HARD_PER_SIDE:])))
        for s, label in [(s, 1) for s in gold] + [(s, 0) for s in negatives]:
            out.append(ReaderPair(book=r["book"], qid=f"{r['pair']}/{r['side']}", kind=f"pair-{r['kind']}",
                                  question=r["question"], sentence=s["text"], before=s["before"], after=s["after"],
                                  label=label, span=answer_span(s["text"], r["answers"]) if label else None,
                                  source="retrieved", written=True))
    return out


def score(rows: list[dict], model_dir: Path) -> None:
    from pagerag.read.inputs import Passage
    from pagerag.read.reader import Reader

    reader = Reader(model_dir)
    for r in rows:
        if not r["sentences"]:
            continue
        reads = reader.read(r["question"], [Passage(s["text"], s["before"], s["after"]) for s in r["sentences"]])
        for s, got in zip(r["sentences"], reads):
            s["p_pair"], s["margin_pair"] = round(got.p, 5), round(got.margin, 4)


def write(rows: list[dict], path: Path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--score", type=Path, nargs="*", default=[])
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--pos-weight", type=float, default=3.0)
    ap.add_argument("--folds", default="0,1")
    ap.add_argument("--n-folds", type=int, default=2)
    ap.add_argument("--no-final", action="store_true")
    args = ap.parse_args()
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    rows = load(args.table)
    hyper = Hyper(layers=args.layers, epochs=args.epochs, pos_weight=args.pos_weight)
    pairs = reader_pairs(rows)
    log(f"{len(pairs)} reader pairs, {sum(p.label for p in pairs)} positive, {sum(p.span is not None for p in pairs)} spans")
    args.out.mkdir(parents=True, exist_ok=True)
    groups = inner_folds(sorted(TRAIN_BOOKS), args.n_folds)
    for k in [int(x) for x in args.folds.split(",") if x]:
        fold = args.out / f"fold{k}"
        if not (fold / "onnx" / "reader.onnx").is_file():
            train([p for p in pairs if p.book not in groups[k]], fold, hyper, log)
            export(fold, fold / "onnx", {"held_out": sorted(groups[k]), "hyper": hyper.to_dict()}, log=log)
        score([r for r in rows if r["book"] in groups[k]], fold / "onnx")
    write(rows, args.out / (args.table.stem + ".scored.jsonl"))
    if not args.no_final:
        final = args.out / "final"
        if not (final / "onnx" / "reader.onnx").is_file():
            train(pairs, final, hyper, log)
            export(final, final / "onnx", {"books": sorted(TRAIN_BOOKS), "hyper": hyper.to_dict()}, log=log)
        for path in args.score:
            other = load(path)
            score(other, final / "onnx")
            write(other, args.out / (path.stem + ".scored.jsonl"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
