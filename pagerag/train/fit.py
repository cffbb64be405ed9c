"""Fit the book models on the training books' feature tables, choose their settings by
leave-books-out cross-validation, report per fold, and write the packaged models.

    python -m pagerag.train.fit --features /work/features [--p-yes /work/features/p_yes.jsonl] \\
        --report out/fit_report.json [--write]

Only the 15 training books' tables are read (test books' tables in the same folder are skipped). Every choice here --
the RCS features kept, the L2 priors, the ranker's label, the default target CWARs -- is made on
held-out books: each of the 15 is scored by models fitted on the other 14 (whose own thresholds
and stacked inputs are held out again inside those 14: pagerag.train.stack). `--write` fits on
all 15 and writes pagerag/confidence/book_rcs.json, pagerag/generate/models/ranker.json,
sufficiency.json (and sufficiency_llm.json when P(yes) values are given).
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
from .policy import Operating, by_kind, replay, scores
from .stack import Config, Example, Level1, Stack, fit_logistic_model, load_examples, rcs_data, sentence_positive

PACKAGE = Path(__file__).resolve().parent.parent
RCS_EXTRAS = ("bm25_rel_margin", "bm25_lift", "bm25_dense_agree", "q_mentions", "mention_cov", "mention_head_cov",
              "mention_hits", "mention_head_hits", "top1_links", "linked_share", "bridge_in_evidence", "bridge_margin",
              "bridge_head_hit", "evidence_redundancy", "qword_cov", "n_linked", "path_found")
PRIORS = (1.0, 3.0, 10.0, 30.0)
RANKER_LABELS = ("answer|evidence", "answer", "lenient")
CWARS = (0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3)


def books_of(examples: Sequence[Example]) -> list[str]:
    return sorted({e.book for e in examples})


# --------------------------------------------------------------------------------------------
# RCS


def lobo_rcs(examples: Sequence[Example], names: Sequence[str], prior: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Held-out RCS scores (each book from a model fitted on the others), labels, books."""
    s, y, g = [], [], []
    for b in books_of(examples):
        X, labels = rcs_data([e for e in examples if e.book != b], names)
        model = fit_logistic_model(X, labels, names, prior)
        Xb, yb = rcs_data([e for e in examples if e.book == b], names)
        if yb.size:
            s.append(model.score_matrix(Xb))
            y.append(yb)
            g += [b] * yb.size
    return np.concatenate(s), np.concatenate(y), np.array(g)


def select_rcs(examples: Sequence[Example], log) -> tuple[list[str], float, dict]:
    """phi1-phi9 always; extras dropped one at a time while held-out AUC-AC does not fall."""
    def score(names, prior):
        s, y, _ = lobo_rcs(examples, names, prior)
        return auc_ac(s, y)

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
    s, y, g = lobo_rcs(examples, names, prior)
    s9, _, _ = lobo_rcs(examples, PAPER_FEATURES, prior)
    X, _ = rcs_data(examples, ["hop1_max", "hop1_entropy", "query_len", "hop1_margin", "hop1_lift"])
    rows = {"RCS": s, "RCS (phi1-phi9 only)": s9, "max-score": X[:, 0], "entropy": 1 - X[:, 1],
            "query-len-inv": 1 / (1 + X[:, 2] / 20), "margin": X[:, 3], "lift": X[:, 4]}
    out = {name: {"auc_ac": auc_ac(v, y)} for name, v in rows.items()}
    for name in ("RCS", "RCS (phi1-phi9 only)"):
        out[name].update(ece=ece(rows[name], y), brier=brier(rows[name], y))
    out["oracle"] = {"auc_ac": auc_ac(y, y)}
    out["base_rate"] = float(y.mean())
    out["per_book"] = {b: {"n": int((g == b).sum()), "auc_ac": auc_ac(s[g == b], y[g == b])} for b in sorted(set(g))}
    return out


# --------------------------------------------------------------------------------------------
# Ranker


def lobo_ranker(examples: Sequence[Example], cfg: Config) -> dict:
    """Held-out top-1 quality of the ranker: on answerable examples whose retrieval holds the
    evidence, the share whose best sentence is a positive, and whose quote is leniently right."""
    hit, lenient, n = 0, 0, 0
    for b in books_of(examples):
        level1 = Level1.fit([e for e in examples if e.book != b], cfg)
        for e in examples:
            v = e.variants["default"]
            if e.book != b or e.kind != "answerable" or v.labels["suff"] != 1 or not len(v.sents):
                continue
            order, _ = level1.ranked(v)
            hit += int(sentence_positive(v.sent_labels[order[:1]], "answer|evidence")[0])
            lenient += int(v.sent_labels[order[0], 4])
            n += 1
    return {"n": n, "top1_positive": hit / max(n, 1), "top1_lenient": lenient / max(n, 1)}


# --------------------------------------------------------------------------------------------
# The stack and the policy


def lobo_stack(examples: Sequence[Example], cfg: Config, ops: Sequence[Operating]) -> dict:
    """Per operating point: the policy replayed on each book with a stack fitted on the others."""
    outcomes: dict[int, list] = {i: [] for i in range(len(ops))}
    suff_held, suff_y = [], []
    for b in books_of(examples):
        stack = Stack.fit([e for e in examples if e.book != b], cfg)
        held = [e for e in examples if e.book == b]
        for i, op in enumerate(ops):
            outcomes[i] += replay(stack, held, op)
        for e in held:
            if e.variants["default"].labels["suff"] is not None and (not cfg.llm or e.p_yes is not None):
                suff_held.append(stack.suff_score(e, "default"))
                suff_y.append(e.variants["default"].labels["suff"])
    s, y = np.array(suff_held), np.array(suff_y, dtype=np.float64)
    return {"outcomes": outcomes, "suff": {"n": int(y.size), "auc_ac": auc_ac(s, y), "ece": ece(s, y), "brier": brier(s, y),
                                           "base_rate": float(y.mean())}}


def choose_operating(results: dict, ops: Sequence[Operating]) -> int:
    """The operating point to ship: the best BBS among those with false refusal <= 20% (else
    the best BBS)."""
    table = [scores(results["outcomes"][i]) for i in range(len(ops))]
    ok = [i for i, t in enumerate(table) if t["false_refusal"] <= 0.20]
    return max(ok or range(len(ops)), key=lambda i: table[i]["bbs"])


def per_fold(outcomes) -> dict:
    books = sorted({o.book for o in outcomes})
    return {b: scores([o for o in outcomes if o.book == b]) for b in books}


# --------------------------------------------------------------------------------------------
# Writing the models


def write_models(stack: Stack, op: Operating, report: dict, llm: bool) -> list[Path]:
    from ..confidence.model import BOOK_MODEL_PATH

    models = PACKAGE / "generate" / "models"
    models.mkdir(exist_ok=True)
    note = {"books": list(TRAIN_BOOKS), "fitted_by": "python -m pagerag.train.fit", "config": asdict(stack.cfg)}
    stack.level1.rcs.training, stack.level1.rcs.target_cwar = {**note, "label": "every evidence statement retrieved"}, op.gate_cwar or 0.0
    stack.level1.rcs.tau = stack.level1.rcs.tau_for(op.gate_cwar)
    stack.level1.ranker.training = {**note, "label": stack.cfg.ranker_label}
    stack.suff.training = {**note, "label": "the retrieved evidence supports an answer", "operating": asdict(op)}
    stack.suff.target_cwar = op.suff_cwar
    stack.suff.tau = stack.suff.tau_for(op.suff_cwar)
    stack.suff.metrics = report.get("sufficiency", {})
    paths = []
    if not llm:
        paths += [stack.level1.rcs.save(BOOK_MODEL_PATH), stack.level1.ranker.save(models / "ranker.json")]
    paths.append(stack.suff.save(models / ("sufficiency_llm.json" if llm else "sufficiency.json")))
    return paths


def load_p_yes(path: Path) -> dict[str, float]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return {r["id"]: float(r["p_yes"]) for r in rows if r.get("p_yes") is not None}


def run(features: Path, report_path: Path, write: bool, p_yes: Path | None, log) -> dict:
    examples = load_examples(read_tables(features, list(TRAIN_BOOKS)))  # test books' tables are never read
    if p_yes is not None:
        values = load_p_yes(p_yes)
        for e in examples:
            e.p_yes = values.get(e.id)
    log(f"{len(examples)} examples from {len(books_of(examples))} books")
    report: dict = {}
    names, rcs_prior, trail = select_rcs(examples, log)
    report["rcs_selection"] = {"kept": names, "prior": rcs_prior, "trail": trail}
    report["rcs"] = rcs_report(examples, names, rcs_prior)
    log(f"rcs: {json.dumps({k: v for k, v in report['rcs'].items() if k != 'per_book'})}")
    cfg = Config(rcs_features=names, rcs_prior=rcs_prior)
    ranker = {f"{label} prior {p}": lobo_ranker(examples, replace(cfg, ranker_label=label, ranker_prior=p))
              for label in RANKER_LABELS for p in (1.0, 10.0)}
    best = max(ranker, key=lambda k: (ranker[k]["top1_lenient"], ranker[k]["top1_positive"]))
    label, prior = best.split(" prior ")
    cfg = replace(cfg, ranker_label=label, ranker_prior=float(prior))
    report["ranker"] = ranker
    log(f"ranker: chose {best}: {ranker[best]}")
    ops = [Operating(g, s, esc, ext) for g in (None, *CWARS) for s in CWARS for esc in (True,) for ext in (True, False)
           if g is None or g >= s]
    results = lobo_stack(examples, cfg, ops)
    pick = choose_operating(results, ops)
    op = ops[pick]
    report["operating_points"] = [{**asdict(o), **scores(results["outcomes"][i])} for i, o in enumerate(ops)]
    report["chosen"] = {**asdict(op), **scores(results["outcomes"][pick]), "by_kind": by_kind(results["outcomes"][pick]),
                        "per_book": per_fold(results["outcomes"][pick])}
    report["sufficiency"] = results["suff"]
    log(f"chosen {op}: {json.dumps(scores(results['outcomes'][pick]))}")
    if write:
        stack = Stack.fit(examples, cfg)
        for path in write_models(stack, op, report, llm=False):
            log(f"wrote {path}")
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=1, default=float) + "\n", encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pagerag.train.fit", description=__doc__.split("\n")[0])
    ap.add_argument("--features", required=True, help="Folder of the training books' feature tables.")
    ap.add_argument("--report", required=True, help="Where to write the cross-validation report (JSON).")
    ap.add_argument("--p-yes", default="", help="JSONL of {id, p_yes} (python -m pagerag.train.llm_features).")
    ap.add_argument("--write", action="store_true", help="Fit on all training books and write the packaged models.")
    args = ap.parse_args(argv)
    run(Path(args.features), Path(args.report), args.write, Path(args.p_yes) if args.p_yes else None,
        log=lambda m: print(m, file=sys.stderr, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
