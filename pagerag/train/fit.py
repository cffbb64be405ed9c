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
SUFF_CWARS = (0.025, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.2, 0.25, 0.3, 0.35)
GATE_CWARS = (0.3, 0.4, 0.5, 0.6)  # the gate always runs (rcs_gate = auto); "no gate" is an ablation
SUFF_LABELS = ("suff", "answer_retrieved")
# Feature groups whose worth is measured by leaving them out (the old hand-written rule's signals
# among them: names found, attribute words covered, a candidate of the asked type).
ABLATIONS = {
    "rule signals (names_evidence, attr_span, top_names, top_attr)": ("names_evidence", "attr_span", "top_names", "top_attr"),
    "answer-type signals (typed, top_cand, cand_top3)": ("typed", "top_cand", "cand_top3"),
    "rcs": ("rcs",),
    "dense (top_dense, max_dense)": ("top_dense", "max_dense"),
    "graph (graph_paths, best_path, community_match, graph_only_share)": ("graph_paths", "best_path", "community_match",
                                                                          "graph_only_share"),
}
RANKER_ABLATIONS = {"answer-type candidates (cand, cand_miss)": ("cand", "cand_miss")}


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


TARGET_REFUSAL = 0.85  # the issue's target for correct refusal


def choose_operating(results: dict, ops: Sequence[Operating]) -> int:
    """The operating point to ship: refusing is what the product exists for, so among the points
    whose held-out correct refusal reaches TARGET_REFUSAL, the best BBS (the most right answers
    for that caution); when none reaches it, the highest correct refusal."""
    table = [scores(results["outcomes"][i]) for i in range(len(ops))]
    ok = [i for i, t in enumerate(table) if t["correct_refusal"] >= TARGET_REFUSAL]
    if ok:
        return max(ok, key=lambda i: (table[i]["bbs"], -table[i]["false_refusal"]))
    return max(range(len(ops)), key=lambda i: (table[i]["correct_refusal"], table[i]["bbs"]))


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
    log(f"{len(examples)} examples from {len(books_of(examples))} books")
    report: dict = {}
    # 1. the book RCS: features and prior
    names, rcs_prior, trail = select_rcs(examples, log)
    report["rcs_selection"] = {"kept": names, "prior": rcs_prior, "trail": trail}
    report["rcs"] = rcs_report(examples, names, rcs_prior)
    log(f"rcs: {json.dumps({k: v for k, v in report['rcs'].items() if k != 'per_book'}, default=float)}")
    cfg = Config(rcs_features=names, rcs_prior=rcs_prior)
    # 2. the ranker: label and prior, then what its answer-type features are worth
    ranker = {f"{label} prior {p}": lobo_ranker(examples, replace(cfg, ranker_label=label, ranker_prior=p))
              for label in RANKER_LABELS for p in (1.0, 10.0)}
    best = max(ranker, key=lambda k: (ranker[k]["top1_lenient"], ranker[k]["top1_positive"]))
    label, prior = best.split(" prior ")
    cfg = replace(cfg, ranker_label=label, ranker_prior=float(prior))
    report["ranker"] = ranker
    report["ranker_ablations"] = {name: lobo_ranker(examples, replace(cfg, sentence_features=[
        f for f in cfg.sentence_features if f not in drop])) for name, drop in RANKER_ABLATIONS.items()}
    log(f"ranker: chose {best}: {ranker[best]}; ablations {report['ranker_ablations']}")
    # 3. the sufficiency model: fitting label and prior, by held-out AUC-AC
    probe = [Operating(None, 0.2)]
    trials = {(lab, p): lobo_stack(examples, replace(cfg, suff_label=lab, suff_prior=p), probe)["suff"]
              for lab in SUFF_LABELS for p in PRIORS}
    lab, prior = max(trials, key=lambda k: trials[k]["auc_ac"])
    cfg = replace(cfg, suff_label=lab, suff_prior=prior)
    report["sufficiency_selection"] = {f"{k[0]} prior {k[1]}": v for k, v in trials.items()}
    log(f"sufficiency: chose label {lab} prior {prior}: {trials[(lab, prior)]}")
    # 4. operating points (target CWARs of gate and sufficiency, quote extension)
    ops = [Operating(g, c, True, ext) for g in GATE_CWARS for c in SUFF_CWARS for ext in (True, False)]
    results = lobo_stack(examples, cfg, ops)
    pick = choose_operating(results, ops)
    op = ops[pick]
    report["operating_points"] = [{**asdict(o), **scores(results["outcomes"][i])} for i, o in enumerate(ops)]
    report["chosen"] = {**asdict(op), **scores(results["outcomes"][pick]), "by_kind": by_kind(results["outcomes"][pick]),
                        "per_book": per_fold(results["outcomes"][pick])}
    report["sufficiency"] = results["suff"]
    report["config"] = asdict(cfg)
    log(f"chosen {op}: {json.dumps(scores(results['outcomes'][pick]))}")
    # 5. what each feature group is worth at that operating point
    report["ablations"] = {}
    for name, drop in ABLATIONS.items():
        trial = lobo_stack(examples, replace(cfg, sufficiency_features=[f for f in cfg.sufficiency_features
                                                                         if f not in drop]), [op])
        report["ablations"][name] = {**trial["suff"], **scores(trial["outcomes"][0])}
        log(f"without {name}: {json.dumps(report['ablations'][name], default=float)}")
    report["ablations"]["no gate (same sufficiency target)"] = scores(lobo_stack(examples, cfg, [replace(op, gate_cwar=None)])["outcomes"][0])
    report["ablations"]["no escalation"] = scores(lobo_stack(examples, cfg, [replace(op, escalate=False)])["outcomes"][0])
    if write:
        stack = Stack.fit(examples, cfg)
        for path in write_models(stack, op, report, llm=False):
            log(f"wrote {path}")
    if p_yes is not None:
        report["llm"] = fit_llm(examples, cfg, op, p_yes, write, log)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=1, default=float) + "\n", encoding="utf-8")
    return report


def fit_llm(examples: Sequence[Example], cfg: Config, op: Operating, p_yes: Path, write: bool, log) -> dict:
    """The sufficiency model with the LLM's P(yes), on the examples where it was measured: held-out
    by book against the no-LLM model on the same examples, then (with write) fitted on all."""
    values = load_p_yes(p_yes)
    for e in examples:
        e.p_yes = values.get(e.id)
    measured = [e for e in examples if e.p_yes is not None]
    out = {"n": len(measured)}
    llm_cfg = replace(cfg, llm=True)
    for name, c in (("without P(yes)", cfg), ("with P(yes)", llm_cfg)):
        # level 1 from every example, the sufficiency model and its curve from the measured ones
        trial = lobo_stack_llm(examples, c)
        out[name] = trial
        log(f"llm sample, {name}: {json.dumps(trial, default=float)}")
    if write:
        stack = Stack.fit(examples, llm_cfg)
        for path in write_models(stack, op, {"sufficiency": out["with P(yes)"]}, llm=True):
            log(f"wrote {path}")
    return out


def lobo_stack_llm(examples: Sequence[Example], cfg: Config) -> dict:
    """Held-out sufficiency scores on the P(yes) sample: AUC-AC, ECE, and the refusal rates at the
    threshold each fold's own curve gives for each target CWAR."""
    measured = [e for e in examples if e.p_yes is not None]
    rows = []
    for b in books_of(measured):
        stack = Stack.fit([e for e in examples if e.book != b], replace(cfg, llm=True) if cfg.llm else cfg)
        for e in measured:
            if e.book == b:
                p = stack.suff_score(e, "default")
                rows.append((p, e.variants["default"].labels["suff"], e.kind == "answerable",
                             {c: p >= stack.suff.tau_for(c) for c in SUFF_CWARS}))
    labelled = [(p, y) for p, y, _, _ in rows if y is not None]
    s, y = np.array([r[0] for r in labelled]), np.array([r[1] for r in labelled], dtype=np.float64)
    rates = {}
    for c in SUFF_CWARS:
        ans = [r[3][c] for r in rows if r[2]]
        neg = [r[3][c] for r in rows if not r[2]]
        rates[str(c)] = {"correct_refusal": 1 - float(np.mean(neg)), "false_refusal": 1 - float(np.mean(ans))}
    return {"auc_ac": auc_ac(s, y), "ece": ece(s, y), "brier": brier(s, y), "n": int(y.size), "by_target": rates}


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
