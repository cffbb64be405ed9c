"""Fit the evidence-need classifier (pagerag/retrieve/need_model.json) on the training books.

    python -m pagerag.train.need                  # reads $PAGERAG_DATA_DIR/graphrag-bench-novel
    python -m pagerag.train.need --out need_model.json --report need_report.json

Labels come from the GraphRAG-Bench question types of the 15 training books (retrieve/need.py);
the inputs are the question's embedding and the wording cues. The L2 strength and whether the
cues are used are chosen by leave-one-book-out accuracy (macro-averaged over the classes, so the
many fact questions do not decide alone); the model is then refitted on all 15 books. The test
books and the DEV sets are never read.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from ..retrieve.need import CLASSES, CUES, MODEL_FILE, NeedModel, model_inputs
from .books import TRAIN_BOOKS, load_questions
from .logistic import fitted_parts, leave_one_book_out, logistic

LABEL_OF = {"Fact Retrieval": "local", "Complex Reasoning": "complex", "Contextual Summarize": "global",
            "Creative Generation": "global"}
C_GRID = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3)


def training_questions(data_dir: Path) -> list[dict]:
    by_book = load_questions(data_dir)
    return [{"id": q["id"], "book": book, "question": q["question"], "label": LABEL_OF[q["question_type"]]}
            for book in TRAIN_BOOKS for q in by_book.get(book, []) if q["question_type"] in LABEL_OF]


def design(rows: list[dict], vectors: np.ndarray, use_cues: bool) -> np.ndarray:
    return np.vstack([model_inputs(r["question"], v, use_cues) for r, v in zip(rows, vectors)])


def fit(x: np.ndarray, y: np.ndarray, c: float, use_cues: bool, info: dict | None = None) -> NeedModel:
    mean, scale, model = fitted_parts(need_pipeline(c).fit(x, y))
    order = [list(model.classes_).index(k) for k in CLASSES]
    return NeedModel(CLASSES, model.coef_[order], model.intercept_[order], mean, scale, use_cues, info or {})


def need_pipeline(c: float):
    return logistic(c, max_iter=2000, class_weight="balanced")


def macro_accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    return float(np.mean([np.mean(pred[y == k] == k) for k in CLASSES if (y == k).any()]))


def leave_books_out(rows: list[dict], vectors: np.ndarray, c: float, use_cues: bool) -> np.ndarray:
    """Out-of-fold predictions: each book predicted by a model fitted on the other 14
    (scikit-learn LeaveOneGroupOut)."""
    x = design(rows, vectors, use_cues)
    y = np.array([r["label"] for r in rows])
    books = np.array([r["book"] for r in rows])
    return leave_one_book_out(need_pipeline(c), x, y, books).astype(object)


def choose_and_fit(rows: list[dict], vectors: np.ndarray, log=print) -> tuple[NeedModel, dict]:
    y = np.array([r["label"] for r in rows])
    results = []
    for use_cues in (False, True):
        for c in C_GRID:
            pred = leave_books_out(rows, vectors, c, use_cues)
            results.append({"C": c, "use_cues": use_cues, "macro_accuracy": round(macro_accuracy(y, pred), 4),
                            "accuracy": round(float(np.mean(pred == y)), 4),
                            "per_class": {k: round(float(np.mean(pred[y == k] == k)), 4) for k in CLASSES}})
            log(f"C={c} cues={use_cues}: macro {results[-1]['macro_accuracy']:.3f} acc {results[-1]['accuracy']:.3f} "
                f"{results[-1]['per_class']}")
    best = max(results, key=lambda r: (r["macro_accuracy"], -abs(np.log(r["C"]))))
    info = {"fitted_on": list(TRAIN_BOOKS), "questions": len(rows), "labels": dict(Counter(y.tolist())),
            "chosen": best, "cv": "leave one training book out"}
    model = fit(design(rows, vectors, best["use_cues"]), y, best["C"], best["use_cues"], info)
    return model, {"grid": results, "chosen": best}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pagerag.train.need", description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("PAGERAG_DATA_DIR", ""))
    ap.add_argument("--out", default=str(MODEL_FILE))
    ap.add_argument("--report", default="")
    args = ap.parse_args(argv)
    if not args.data:
        print("error: no data folder: pass --data or set PAGERAG_DATA_DIR", file=sys.stderr)
        return 2
    from ..retrieve.api import get_encoder
    from ..settings import load_settings

    from ..retrieve.api import single_threaded_blas

    rows = training_questions(Path(args.data))
    encode = get_encoder(load_settings(environ={}))
    vectors = np.asarray(encode([r["question"] for r in rows]), np.float64)
    with single_threaded_blas():  # small matrices: a threaded BLAS is 100x slower on a busy machine
        model, report = choose_and_fit(rows, vectors, log=lambda m: print(m, file=sys.stderr, flush=True))
    Path(args.out).write_text(json.dumps(model.to_json()) + "\n", encoding="utf-8")
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"chosen: {report['chosen']}; cues {list(CUES)}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
