"""Two runs of the same benchmark on the same questions, compared question by question.

    python benchmarks/paired.py retrieval BEFORE.json AFTER.json      # benchmarks/retrieval.py --json
    python benchmarks/paired.py book_qa BEFORE_DIR AFTER_DIR          # benchmarks/book_qa.py --out

A change that moves a few questions either way is noise; one that moves many the same way is not.
Printed: for retrieval, per set and pipeline the mean change of evidence recall with a 95%
bootstrap interval (2,000 resamples of the questions, seed 0) and how many questions went up or
down; for book QA, per group (the test or the training books; the DEV sets) how many decisions are the same, the
lenient verdicts of the answerable questions both runs answered, and the change of correct
refusal, false refusal and lenient accuracy in points with the same kind of interval.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pagerag.train.books import TRAIN_BOOKS  # noqa: E402

RESAMPLES = 2000


def interval(values: list[float]) -> tuple[float, float]:
    """95% bootstrap interval of a statistic already computed per resample."""
    values = sorted(values)
    return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]


def retrieval(before: Path, after: Path) -> None:
    def rows(path: Path) -> dict:
        return {(r["set"], r["book"], r["pipeline"], r["question"]): r["recall"]
                for r in json.loads(path.read_text(encoding="utf-8"))["recall"]}

    a, b = rows(before), rows(after)
    rng = random.Random(0)
    print("| set | pipeline | n | recall before → after | change, 95% interval | up / down |")
    print("| --- | --- | ---: | ---: | --- | ---: |")
    for name, pipeline in sorted({(k[0], k[2]) for k in a.keys() & b.keys()}):
        keys = [k for k in a.keys() & b.keys() if k[0] == name and k[2] == pipeline]
        change = [b[k] - a[k] for k in keys]
        lo, hi = interval([statistics.mean(rng.choices(change, k=len(change))) for _ in range(RESAMPLES)])
        print(f"| {name} | {pipeline} | {len(keys)} | {statistics.mean(a[k] for k in keys):.3f} → "
              f"{statistics.mean(b[k] for k in keys):.3f} | {statistics.mean(change):+.4f} [{lo:+.4f}, {hi:+.4f}] | "
              f"{sum(x > 1e-9 for x in change)} / {sum(x < -1e-9 for x in change)} |")


def rates(rows: list[dict]) -> tuple[float, float, float]:
    """Correct refusal, false refusal, lenient accuracy (points)."""
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    refused = lambda rs: 100 * sum(r["decision"] != "answered" for r in rs) / max(len(rs), 1)  # noqa: E731
    right = 100 * sum(r["decision"] == "answered" and r["lenient"] for r in answerable) / max(len(answerable), 1)
    return refused(unanswerable), refused(answerable), right


def book_qa(before: Path, after: Path) -> None:
    def rows(path: Path) -> dict:
        lines = (path / "results.jsonl").read_text(encoding="utf-8").splitlines()
        return {(r["system"], r["set"], r["id"]): r for r in map(json.loads, lines)}

    a, b = rows(before), rows(after)
    rng = random.Random(0)
    print("| group | n | same decision | same lenient verdict (answered by both) | correct refusal | false refusal | lenient |")
    print("| --- | ---: | ---: | ---: | --- | --- | --- |")
    for dev in (False, True):
        keys = sorted(k for k in a.keys() & b.keys() if k[1].startswith("DEV") == dev)
        if not keys:
            continue
        group = "DEV sets" if dev else "training books" if {k[1] for k in keys} <= set(TRAIN_BOOKS) else "test books"
        same = sum(a[k]["decision"] == b[k]["decision"] for k in keys)
        both = [k for k in keys if a[k]["answerable"] and a[k]["decision"] == b[k]["decision"] == "answered"]
        resampled = []
        for _ in range(RESAMPLES):
            sample = rng.choices(keys, k=len(keys))
            resampled.append([y - x for x, y in zip(rates([a[k] for k in sample]), rates([b[k] for k in sample]))])
        cells = []
        for i, (x, y) in enumerate(zip(rates([a[k] for k in keys]), rates([b[k] for k in keys]))):
            lo, hi = interval([r[i] for r in resampled])
            cells.append(f"{x:.1f} → {y:.1f} [{lo:+.1f}, {hi:+.1f}]")
        print(f"| {group} | {len(keys)} | {same} ({100 * same / len(keys):.1f}%) | "
              f"{sum(a[k]['lenient'] == b[k]['lenient'] for k in both)} of {len(both)} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=("retrieval", "book_qa"))
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args()
    (retrieval if args.kind == "retrieval" else book_qa)(args.before, args.after)


if __name__ == "__main__":
    main()
