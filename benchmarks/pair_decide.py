"""Offline answer-or-refuse decisions measured on pairs, held out by book, from pair tables
(benchmarks/pair_table.py). A side is answered when its score reaches tau; the side that says is
right when it is answered and its best sentence (by the reader) holds a gold string; the silent
side is right when refused. tau is chosen on the other books (most pairs right on both sides,
refused where silent >= 60% when reachable) and applied to the held-out book.

    python benchmarks/pair_decide.py --table TRAIN.jsonl [--report DEV.jsonl TEST.jsonl] [--rescore READER_DIR]
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

REFUSE_FLOOR = 0.60


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8")]


def logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def best_sentence(side: dict, key: str = "p") -> dict | None:
    sents = side["sentences"]
    return max(sents, key=lambda s: s[key]) if sents else None


# side scores: each takes one side's row and returns a float (higher: answer)
def s_top(side, key="p"):
    return logit(max((s[key] for s in side["sentences"]), default=0.0))


def s_contrast(side, key="p", k=5):
    ps = sorted((logit(s[key]) for s in side["sentences"]), reverse=True)
    if not ps:
        return -10.0
    rest = ps[1:1 + k]
    return ps[0] - (sum(rest) / len(rest) if rest else logit(0.0))


def s_gap(side, key="p"):
    ps = sorted((logit(s[key]) for s in side["sentences"]), reverse=True)
    return ps[0] - ps[1] if len(ps) > 1 else 0.0


def s_max_feature(name):
    return lambda side, key="p": max((s["features"].get(name, 0.0) for s in side["sentences"]), default=0.0)


SCORES = {"read_top": s_top, "read_contrast": s_contrast, "read_gap": s_gap,
          "max_lex": s_max_feature("lex"), "max_attr": s_max_feature("attr"), "max_dense": s_max_feature("dense"),
          "rcs": lambda side, key="p": side["rcs"]}


def pairs_of(rows: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = defaultdict(dict)
    for r in rows:
        out[r["pair"]]["says" if r["says"] else "silent"] = r
    return {k: v for k, v in out.items() if len(v) == 2}


def outcomes(pairs: dict[str, dict], score, tau: float, key: str = "p") -> np.ndarray:
    """(n, 3): says right, silent refused, both."""
    out = []
    for sides in pairs.values():
        says, silent = sides["says"], sides["silent"]
        best = best_sentence(says, key)
        right = score(says, key) >= tau and best is not None and best["gold"]
        refused = score(silent, key) < tau
        out.append((right, refused, right and refused))
    return np.array(out, dtype=float).reshape(-1, 3)


def choose_tau(pairs: dict[str, dict], score, key: str = "p") -> float:
    values = sorted({score(side, key) for sides in pairs.values() for side in sides.values()})
    cands = [(a + b) / 2 for a, b in zip(values, values[1:])] or [0.0]
    cands = cands[:: max(1, len(cands) // 400)]
    best, best_key = cands[0], (-1.0, -1.0)
    for tau in cands:
        o = outcomes(pairs, score, tau, key).mean(0)
        k = (float(o[1] >= REFUSE_FLOOR), o[2])
        if k > best_key:
            best, best_key = tau, k
    return best


def held_out(pairs: dict[str, dict], score, key: str = "p") -> tuple[np.ndarray, dict]:
    books = sorted({sides["says"]["book"] for sides in pairs.values()})
    rows, taus = [], {}
    for book in books:
        train = {k: v for k, v in pairs.items() if v["says"]["book"] != book}
        test = {k: v for k, v in pairs.items() if v["says"]["book"] == book}
        taus[book] = choose_tau(train, score, key)
        rows.append(outcomes(test, score, taus[book], key))
    return np.vstack(rows), taus


def fmt(o: np.ndarray) -> str:
    m = o.mean(0)
    chance = m[0] * m[1]
    return f"says {m[0]:.3f}  refused {m[1]:.3f}  both {m[2]:.3f}  (chance {chance:.3f}, n={len(o)})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", type=Path, required=True)
    ap.add_argument("--report", type=Path, nargs="*", default=[])
    ap.add_argument("--key", default="p", help="sentence field holding the reader's P")
    args = ap.parse_args()
    train = pairs_of(load(args.table))
    reports = {p.name: pairs_of(load(p)) for p in args.report}
    for name, score in SCORES.items():
        o, taus = held_out(train, score, args.key)
        print(f"{name:14s} LOBO  {fmt(o)}")
        tau = choose_tau(train, score, args.key)
        for rname, rp in reports.items():
            print(f"{'':14s} {rname:5s} {fmt(outcomes(rp, score, tau, args.key))}  tau {tau:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
