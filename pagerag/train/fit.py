"""Fit the question path's decisions on the training books, measure them by nested leave-books-out
cross-validation, and write the packaged models.

    python -m pagerag.train.fit --features F --reads F/reader --report out/fit_report.json [--write]

Inputs: the training books' feature tables (pagerag.train.features) and the reader's held-out
scores on them (pagerag.train.reader_scores); test books' tables in the same folders are never
read. What is chosen, and on what:
  RCS features   phi1-phi9 always; extras dropped one at a time while the leave-one-book-out
                 AUC-AC does not fall (scikit-learn's LeaveOneGroupOut over the 15 books; not
                 nested: the RCS is an input, its own figures are reported apart)
  the stack      per outer fold (one book held out), everything else is chosen on the other 14
                 books only, from their inner held-out scores (pagerag.train.stack): the L2 prior
                 and the weighting of example kinds of the sufficiency model, then the operating
                 point (target CWARs of the gate and of the sufficiency model, the span margin of
                 the extractive answer); the held-out book is then decided with it. The figures
                 reported are these outer folds', so no threshold saw the book it is scored on.
`--write` does the same choice on all 15 books and writes pagerag/confidence/book_rcs.json and
pagerag/generate/models/sufficiency.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from ..confidence.features import PAPER_FEATURES
from ..confidence.metrics import auc_ac, brier, ece
from .books import TRAIN_BOOKS
from .features import read_tables
from .policy import Operating, Outcome, by_kind, replay, scores
from .reader_scores import read_scores
from .stack import Config, Example, Stack, load_examples

PACKAGE = Path(__file__).resolve().parent.parent
RCS_EXTRAS = ("bm25_rel_margin", "bm25_lift", "bm25_dense_agree", "q_mentions", "mention_cov", "mention_head_cov",
              "mention_hits", "mention_head_hits", "top1_links", "linked_share", "bridge_in_evidence", "bridge_margin",
              "bridge_head_hit", "evidence_redundancy", "qword_cov", "n_linked", "path_found")
PRIORS = (1.0, 3.0, 10.0, 30.0)
WEIGHTINGS = ("none", "kinds")
SUFF_CWARS = (0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
GATE_CWARS = (None, 0.4, 0.5, 0.6)
SPAN_MARGINS = (float("-inf"), -6.0, -4.0, -2.0, 0.0, 2.0, 4.0, float("inf"))  # -inf: always the span; inf: always the sentence
HELD_OUT_P = "held_out_p.jsonl"


def books_of(examples: Sequence[Example]) -> list[str]:
    return sorted({e.book for e in examples})


# --------------------------------------------------------------------------------------------
# RCS


def rcs_matrix(examples: Sequence[Example], names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = [e for e in examples if e.variants["default"].labels["rcs"] is not None]
    X = np.array([[e.variants["default"].rcs[n] for n in names] for e in rows], dtype=np.float64)
    y = np.array([e.variants["default"].labels["rcs"] for e in rows], dtype=np.int64)
    return X, y, np.array([e.book for e in rows])


def lobo_scores(X: np.ndarray, y: np.ndarray, groups: np.ndarray, prior: float, weights=None) -> np.ndarray:
    """Held-out P(y=1) of every row, each book scored by a model fitted on the others
    (scikit-learn: z-scoring + logistic regression with C = 1/prior, leave one book out)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import LeaveOneGroupOut, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0 / prior, tol=1e-8, max_iter=1000))
    params = {"logisticregression__sample_weight": weights} if weights is not None else None
    return cross_val_predict(model, X, y, groups=groups, cv=LeaveOneGroupOut(), method="predict_proba",
                             params=params)[:, 1]


def select_rcs(examples: Sequence[Example], log) -> tuple[list[str], float, dict]:
    """phi1-phi9 always; extras dropped one at a time while held-out AUC-AC does not fall."""
    def score(names, prior):
        X, y, g = rcs_matrix(examples, names)
        return auc_ac(lobo_scores(X, y, g, prior), y)

    names = list(PAPER_FEATURES) + [f for f in RCS_EXTRAS if f in examples[0].variants["default"].rcs]
    prior = max(PRIORS, key=lambda p: score(names, p))
    best = score(names, prior)
    trail = {"all": best}
    improved = True
    while improved:
        improved = False
        for f in [f for f in names if f not in PAPER_FEATURES]:
            trial = score([n for n in names if n != f], prior)
            if trial >= best - 1e-4:
                names.remove(f)
                best, improved = trial, True
                trail[f"-{f}"] = trial
                log(f"rcs: dropped {f}: AUC-AC {trial:.4f}")
                break
    prior = max(PRIORS, key=lambda p: score(names, p))
    return names, prior, trail


def rcs_report(examples: Sequence[Example], names: Sequence[str], prior: float) -> dict:
    """Held-out AUC-AC / ECE / Brier of the RCS and of the paper's single-score baselines."""
    X, y, g = rcs_matrix(examples, names)
    s = lobo_scores(X, y, g, prior)
    X9, _, _ = rcs_matrix(examples, PAPER_FEATURES)
    s9 = lobo_scores(X9, y, g, prior)
    B, _, _ = rcs_matrix(examples, ["hop1_max", "hop1_entropy", "query_len", "hop1_margin", "hop1_lift"])
    rows = {"RCS": s, "RCS (phi1-phi9 only)": s9, "max-score": B[:, 0], "entropy": 1 - B[:, 1],
            "query-len-inv": 1 / (1 + B[:, 2] / 20), "margin": B[:, 3], "lift": B[:, 4]}
    out = {name: {"auc_ac": auc_ac(v, y)} for name, v in rows.items()}
    for name in ("RCS", "RCS (phi1-phi9 only)"):
        out[name].update(ece=ece(rows[name], y), brier=brier(rows[name], y))
    out["oracle"] = {"auc_ac": auc_ac(y.astype(float), y)}
    out["base_rate"] = float(y.mean())
    out["n"] = int(y.size)
    return out


# --------------------------------------------------------------------------------------------
# Operating points


def operating_points() -> list[Operating]:
    return [Operating(g, c, True, m) for g in GATE_CWARS for c in SUFF_CWARS for m in SPAN_MARGINS]


def criterion(outcomes: Sequence[Outcome]) -> dict:
    """The scores an operating point is chosen by: correct refusal of each kind of negative
    (written and synthetic apart), and BBS with their mean as the refusal rate."""
    s = scores(outcomes)
    groups = {"written": [o for o in outcomes if o.kind == "written"],
              "synthetic": [o for o in outcomes if not o.answerable and o.kind != "written"]}
    refusals = {k: float(np.mean([o.decision == "refused" for o in v])) for k, v in groups.items() if v}
    ref = float(np.mean(list(refusals.values()))) if refusals else float("nan")
    bbs = 2 * s["lenient"] * ref / (s["lenient"] + ref) if s["lenient"] + ref > 0 else 0.0
    return {**s, "refusal_by_group": refusals, "min_refusal": min(refusals.values(), default=float("nan")),
            "balanced_refusal": ref, "balanced_bbs": bbs}


def choose(examples: Sequence[Example], stack: Stack, ops: Sequence[Operating]) -> tuple[Operating, dict]:
    """The operating point to ship, chosen on the stack's own held-out scores: the best BBS with
    the refusal rate taken as the mean of the written and the synthetic negatives' (ties: the
    higher refusal). Not "the best BBS among points refusing 85% of each kind": held
    out, the written negatives reach it only where nearly every answerable question is refused
    too (docs/decision.md shows the whole trade-off and the target CWAR for each point)."""
    table = []
    for op in ops:
        tau_gate = stack.rcs.tau_for(op.gate_cwar) if op.gate_cwar is not None else None
        table.append(criterion(replay(examples, stack.held_out, tau_gate, stack.suff.tau_for(op.suff_cwar), op,
                                      stack.chooser)))
    pick = max(range(len(ops)), key=lambda i: (round(table[i]["balanced_bbs"], 4), table[i]["balanced_refusal"],
                                                -table[i]["false_refusal"]))
    return ops[pick], table[pick]


def fit_chosen(examples: Sequence[Example], cfg: Config, log=None) -> tuple[Stack, Operating, dict]:
    """The stack whose prior and weighting give the best held-out AUC of P(sufficient) on these
    examples, and its operating point (everything from `examples` alone)."""
    best = None
    for prior in PRIORS:
        for how in WEIGHTINGS:
            trial = replace(cfg, suff_prior=prior, weighting=how)
            stack = Stack.fit(examples, trial)
            auc = suff_auc(examples, stack.held_out)
            if best is None or auc > best[0]:
                best = (auc, stack)
    stack = best[1]
    op, table = choose(examples, stack, operating_points())
    if log:
        log(f"  chose prior {stack.cfg.suff_prior} weighting {stack.cfg.weighting} (held-out AUC {best[0]:.4f}), {op}")
    return stack, op, {"auc": best[0], **table}


def suff_auc(examples: Sequence[Example], held: dict) -> float:
    """AUC of P(sufficient) on the default retrieval: answerable questions whose evidence was
    retrieved against every unanswerable one."""
    from sklearn.metrics import roc_auc_score

    pos = [held[(e.id, "default")][1] for e in examples if e.answerable and e.variants["default"].labels["suff"] == 1]
    neg = [held[(e.id, "default")][1] for e in examples if not e.answerable]
    return float(roc_auc_score([1] * len(pos) + [0] * len(neg), pos + neg))


def nested(examples: Sequence[Example], cfg: Config, log) -> dict:
    """Nested leave-one-book-out: each book decided by models, priors and operating points chosen
    on the other 14 books only."""
    from sklearn.model_selection import LeaveOneGroupOut

    groups = np.array([e.book for e in examples])
    outcomes: list[Outcome] = []
    chosen = {}
    held_scores = {}
    for train, test in LeaveOneGroupOut().split(groups, groups=groups):
        inner = [examples[i] for i in train]
        held = [examples[i] for i in test]
        book = held[0].book
        log(f"outer fold {book}:")
        stack, op, _ = fit_chosen(inner, cfg, log)
        applied = stack.apply(held)
        tau_gate = stack.rcs.tau_for(op.gate_cwar) if op.gate_cwar is not None else None
        outcomes += replay(held, applied, tau_gate, stack.suff.tau_for(op.suff_cwar), op, stack.chooser)
        chosen[book] = {**asdict(op), "suff_prior": stack.cfg.suff_prior, "weighting": stack.cfg.weighting}
        held_scores.update(applied)
    from sklearn.metrics import roc_auc_score

    ans = [e for e in examples if e.answerable]
    neg = [e for e in examples if not e.answerable]
    p = {e.id: held_scores[(e.id, "default")][1] for e in examples}
    return {"all": criterion(outcomes), "by_kind": by_kind(outcomes), "held_out_p": p,
            "by_set": {name: criterion([o for o in outcomes if o.question_set == name]) for name in ("written", "graphrag")},
            "per_book": {b: scores([o for o in outcomes if o.book == b]) for b in books_of(examples)},
            "p_auc_all": float(roc_auc_score([1] * len(ans) + [0] * len(neg), [p[e.id] for e in ans + neg])),
            "chosen_per_fold": chosen, "outcomes": [asdict(o) for o in outcomes]}


# --------------------------------------------------------------------------------------------
# Writing the models


def write_models(stack: Stack, op: Operating, report: dict) -> list[Path]:
    from ..confidence.model import BOOK_MODEL_PATH

    models = PACKAGE / "generate" / "models"
    models.mkdir(exist_ok=True)
    note = {"books": list(TRAIN_BOOKS), "fitted_by": "python -m pagerag.train.fit", "config": asdict(stack.cfg)}
    stack.rcs.training, stack.rcs.target_cwar = {**note, "label": "every evidence statement retrieved"}, op.gate_cwar or 0.0
    stack.rcs.tau = stack.rcs.tau_for(op.gate_cwar) if op.gate_cwar is not None else 0.0
    stack.suff.training = {**note, "label": "the retrieved evidence supports an answer",
                           "operating": {**asdict(op), "span_margin": _finite(op.span_margin)},
                           "chooser": stack.chooser}
    stack.suff.target_cwar = op.suff_cwar
    stack.suff.tau = stack.suff.tau_for(op.suff_cwar)
    stack.suff.metrics = {k: v for k, v in report.items() if k in ("nested", "held_out_auc")}
    return [stack.rcs.save(BOOK_MODEL_PATH), stack.suff.save(models / "sufficiency.json")]


def _finite(x: float) -> float | str:
    return x if np.isfinite(x) else ("inf" if x > 0 else "-inf")


def run(features: Path, reads: Path, report_path: Path, write: bool, log) -> dict:
    books = list(TRAIN_BOOKS)
    examples = load_examples(read_tables(features, books), read_scores(reads, books))  # test books never read
    log(f"{len(examples)} examples from {len(books_of(examples))} books")
    report: dict = {}
    names, rcs_prior, trail = select_rcs(examples, log)
    report["rcs_selection"] = {"kept": names, "prior": rcs_prior, "trail": trail}
    report["rcs"] = rcs_report(examples, names, rcs_prior)
    log(f"rcs: {json.dumps(report['rcs'], default=float)}")
    cfg = Config(rcs_features=names, rcs_prior=rcs_prior)
    result = nested(examples, cfg, log)
    report["nested"] = {k: v for k, v in result.items() if k not in ("outcomes", "held_out_p")}
    log(f"nested: {json.dumps(report['nested']['all'], default=float)}")
    stack, op, table = fit_chosen(examples, cfg, log)
    report["final"] = {"config": asdict(stack.cfg), "operating": {**asdict(op), "span_margin": _finite(op.span_margin)},
                       "held_out": table}
    report["held_out_auc"] = table["auc"]
    if write:
        for path in write_models(stack, op, report):
            log(f"wrote {path}")
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=1, default=float) + "\n", encoding="utf-8")
    (report_path.parent / "nested_outcomes.jsonl").write_text(
        "".join(json.dumps(o) + "\n" for o in result["outcomes"]), encoding="utf-8")
    # each training example's P(sufficient) from models that never saw its book: what the LLM
    # calibration sample is made with (pagerag.train.calibration_sample)
    (report_path.parent / HELD_OUT_P).write_text(
        "".join(json.dumps({"id": i, "p": p}) + "\n" for i, p in sorted(result["held_out_p"].items())), encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pagerag.train.fit", description=__doc__.split("\n")[0])
    ap.add_argument("--features", required=True, help="Folder of the training books' feature tables.")
    ap.add_argument("--reads", required=True, help="Folder of the reader's scores on them (pagerag.train.reader_scores).")
    ap.add_argument("--report", required=True, help="Where to write the cross-validation report (JSON).")
    ap.add_argument("--write", action="store_true", help="Fit on all training books and write the packaged models.")
    args = ap.parse_args(argv)
    run(Path(args.features), Path(args.reads), Path(args.report), args.write,
        log=lambda m: print(m, file=sys.stderr, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
