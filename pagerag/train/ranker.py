"""Fit the candidate ranker (pagerag/retrieve/ranker.json) on the training books.

    python -m pagerag.train.ranker --corpus /work/corpus/book_corpus.jsonl --repos /work/repos \\
        --pools pools/ [--rebuild] [--out pagerag/retrieve/ranker.json] [--report report.json]

Pools (train/ranker_data.py) are built once per book and cached in --pools. Two pointwise logistic
models are fitted — `graph` on every feature of the full pool, `text` on the text floor's
features of its own pool — each with its L2 strength chosen by leave-one-book-out evidence
recall at the budget (the pool packed in model order until B tokens, a statement recalled when
a packed passage locates it), then refitted on all 15 training books. The report gives that
cross-validated recall per question type next to the text floor's own order (reciprocal-rank
fusion of BM25 and dense), so the gain of each model is measured on books it was not fitted on.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..retrieve.pool import FEATURES, TEXT_FEATURES
from ..retrieve.ranker import MODEL_FILE, RankerModel
from .books import TRAIN_BOOKS
from .logistic import fitted_parts, leave_one_book_out, logistic
from .ranker_data import QuestionPool, build_pools

C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0)
BUDGET = 2000


def variant(pool: QuestionPool, name: str) -> tuple[np.ndarray, np.ndarray]:
    return (pool.graph_x, pool.graph_rows) if name == "graph" else (pool.text_x, pool.text_rows)


def fit_model(pools: list[QuestionPool], name: str, c: float) -> RankerModel:
    x, y, _ = stacked(pools, name)
    mean, scale, model = fitted_parts(ranker_pipeline(c).fit(x, y))
    names = FEATURES if name == "graph" else TEXT_FEATURES
    return RankerModel(name, names, model.coef_[0], float(model.intercept_[0]), mean, scale)


def ranker_pipeline(c: float):
    return logistic(c, max_iter=3000)


def stacked(pools: list[QuestionPool], name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every candidate row of the pools (features, labels, book), pool after pool."""
    xs, ys, books = [], [], []
    for p in pools:
        x, rows = variant(p, name)
        xs.append(x)
        ys.append(p.labels(rows))
        books.append(np.full(len(rows), p.book, dtype=object))
    return np.vstack(xs), np.concatenate(ys), np.concatenate(books)


def packed(rows: np.ndarray, scores: np.ndarray, tokens: dict[int, int], budget: int = BUDGET, keep: int = -1) -> set[int]:
    """Rows taken in score order while they fit the budget, the text floor's top row `keep`
    always (what evidence.select does, less trimming)."""
    used, chosen = 0, set()
    if keep in tokens:
        chosen.add(keep)
        used = tokens[keep]
    for i in np.argsort(-scores, kind="stable").tolist():
        row = int(rows[i])
        if row not in chosen and used + tokens[row] <= budget:
            chosen.add(row)
            used += tokens[row]
    return chosen


def recall(pool: QuestionPool, chosen: set[int]) -> float:
    """Share of the question's statements that a chosen passage locates."""
    if not pool.passing:
        return 0.0
    return sum(bool(s & chosen) for s in pool.passing) / len(pool.passing)


def cross_validate(pools: list[QuestionPool], name: str, c: float) -> dict[str, float]:
    """Leave-one-book-out recall per question id: each book's candidates scored (log-odds) by a
    model fitted on the other books (scikit-learn LeaveOneGroupOut), then packed per question."""
    x, y, books = stacked(pools, name)
    scores = leave_one_book_out(ranker_pipeline(c), x, y, books, method="decision_function")
    out: dict[str, float] = {}
    start = 0
    for p in pools:
        rows = variant(p, name)[1]
        out[p.qid] = recall(p, packed(rows, scores[start: start + len(rows)], p.tokens, keep=p.text_rank1))
        start += len(rows)
    return out


def floor_order(pools: list[QuestionPool]) -> dict[str, float]:
    """The text floor's own order (RRF of BM25 and dense): the baseline without a ranker."""
    idx = TEXT_FEATURES.index("text_rr")
    return {p.qid: recall(p, packed(p.text_rows, p.text_x[:, idx], p.tokens, keep=p.text_rank1)) for p in pools}


def by_type(pools: list[QuestionPool], per_q: dict[str, float]) -> dict[str, float]:
    groups: dict[str, list[float]] = defaultdict(list)
    for p in pools:
        groups[p.qtype].append(per_q[p.qid])
        groups["ALL"].append(per_q[p.qid])
    return {t: round(float(np.mean(v)), 4) for t, v in sorted(groups.items())}


def choose(pools: list[QuestionPool], name: str, log=print) -> tuple[float, dict]:
    results = {}
    for c in C_GRID:
        per_q = cross_validate(pools, name, c)
        results[c] = {"per_type": by_type(pools, per_q), "per_question": per_q}
        log(f"{name} C={c}: {results[c]['per_type']}")
    best = max(C_GRID, key=lambda c: (results[c]["per_type"]["ALL"], -abs(np.log10(c) + 1)))
    return best, results


def main(argv: list[str] | None = None) -> int:
    import os

    ap = argparse.ArgumentParser(prog="python -m pagerag.train.ranker", description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="book_corpus.jsonl (python -m pagerag.train.corpus).")
    ap.add_argument("--repos", required=True, help="Folder holding <Novel-id>.rag repositories.")
    ap.add_argument("--data", default=os.environ.get("PAGERAG_DATA_DIR", ""))
    ap.add_argument("--pools", required=True, help="Folder caching the candidate pools, one file per book (built when missing).")
    ap.add_argument("--books", default="", help="Comma-separated training books (default: all 15).")
    ap.add_argument("--rebuild", action="store_true", help="Rebuild the pools even when cached.")
    ap.add_argument("--out", default=str(MODEL_FILE))
    ap.add_argument("--report", default="")
    args = ap.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    books = [b for b in args.books.split(",") if b] or list(TRAIN_BOOKS)
    unknown = [b for b in books if b not in TRAIN_BOOKS]
    if unknown:
        print(f"error: {unknown[0]} is not a training book (the ranker is fitted on training books only)", file=sys.stderr)
        return 2
    pools = build_pools(Path(args.corpus), Path(args.repos), Path(args.data), books, Path(args.pools),
                        args.rebuild, log)
    from ..retrieve.api import single_threaded_blas

    with single_threaded_blas():  # small matrices: a threaded BLAS is 100x slower on a busy machine
        return _fit_and_write(args, pools, log)


def _fit_and_write(args, pools: list[QuestionPool], log) -> int:
    baseline = floor_order(pools)
    report = {"questions": len(pools), "books": sorted({p.book for p in pools}),
              "text_floor_order": by_type(pools, baseline), "models": {}}
    log(f"text floor order: {report['text_floor_order']}")
    models = {}
    for name in ("text", "graph"):
        c, results = choose(pools, name, log)
        models[name] = fit_model(pools, name, c)
        report["models"][name] = {"C": c, "cv_recall": results[c]["per_type"],
                                  "grid": {str(k): v["per_type"] for k, v in results.items()}}
    out = {"fitted_on": list(TRAIN_BOOKS), "budget": BUDGET, "questions": len(pools),
           "cv": {name: report["models"][name]["cv_recall"] for name in models},
           "models": {name: m.to_json() for name, m in models.items()}}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "models"} |
                     {"models": {n: {"C": m["C"], "cv_recall": m["cv_recall"]} for n, m in report["models"].items()}},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
