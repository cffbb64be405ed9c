"""`pagerag calibrate --llm BACKEND`: fit the answer-or-refuse decision for one LLM.

A stronger model than the project's local 1.5B knows better when excerpts state an answer, and a
weaker one knows worse; neither should be trusted blindly. The package ships a calibration sample
from the 15 training books (`generate/models/calibration_sample.jsonl.gz`, made by `python -m
pagerag.train.calibration_sample`): a few hundred questions, answerable and not, each with the
excerpts the yes/no judge reads at question time, the reader model's held-out P(sufficient) and
the label (the evidence supports an answer). This asks the user's LLM its P(yes) on every one
(prompts/judge_sufficiency_yesno, one short call each, cached), then fits a logistic model on
[logit of the reader's P, logit of P(yes)] with scikit-learn. Its threshold comes from held-out
scores (leave one book out) at the target CWAR of the packaged reader model, so the LLM decision
is as cautious as the one without it. The report says, held out by book, whether the LLM adds
anything (AUC-AC with and without P(yes)). The model is stored in the cache
(`<cache>/calibration/<backend>-<model>.json`) and used by `ask` whenever that backend and model
answer; without it the reader's model alone decides.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Callable

import numpy as np

from ..confidence.metrics import auc_ac
from ..confidence.model import RCSModel, curve_of, l2_for
from ..errors import PageRAGError

PRIOR = 3.0
MIN_EXAMPLES = 20


def read_sample(path: Path) -> list[dict]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError) as exc:
        raise PageRAGError(f"{path}: cannot read the calibration sample ({exc.__class__.__name__})") from None


def p_yes_of(llm, row: dict) -> float | None:
    """The LLM's P(yes) on the sample row's excerpts (as the judge reads them at question time)."""
    from ..generate.sufficiency import llm_p_yes
    from ..records import Excerpt, StageCost

    excerpts = [Excerpt(**e) for e in row["excerpts"]]
    return llm_p_yes(llm, row["question"], excerpts, StageCost(), row.get("graph_context", ""))


def held_out(X: np.ndarray, y: np.ndarray, books: np.ndarray, names: list[str]) -> np.ndarray:
    """Each row scored by a model fitted without its book (scikit-learn LeaveOneGroupOut)."""
    from sklearn.model_selection import LeaveOneGroupOut

    out = np.full(y.size, np.nan)
    for train, test in LeaveOneGroupOut().split(X, y, groups=books):
        if len(set(y[train])) == 2:
            out[test] = RCSModel.fit(X[train], y[train], names, l2=l2_for(train.size, PRIOR)).score_matrix(X[test])
    return out


def calibrate_llm(llm, sample_path: Path, target_cwar: float | None, progress: Callable[[int, int], None] | None = None,
                  limit: int | None = None) -> tuple[RCSModel, dict]:
    """The fitted decision for `llm` and its report (held-out AUC-AC with and without P(yes))."""
    from ..generate.models import SUFFICIENCY, packaged
    from ..generate.sufficiency import LLM_FEATURE, SUFF_LOGIT, p_yes_logit

    rows = [r for r in read_sample(sample_path) if r.get("label") is not None][:limit]
    X, y, books = [], [], []
    for i, row in enumerate(rows, 1):
        p_yes = p_yes_of(llm, row)
        if p_yes is None:
            raise PageRAGError(f"the {llm.name} backend ({llm.model}) gives no next-token log-probabilities, so its "
                               "P(yes) cannot be measured; the reader's model decides alone")
        X.append([p_yes_logit(row["suff_p"]), p_yes_logit(p_yes)])
        y.append(float(row["label"]))
        books.append(row["book"])
        if progress:
            progress(i, len(rows))
    X_, y_, g = np.array(X), np.array(y), np.array(books)
    if len(y_) < MIN_EXAMPLES or len(set(y_)) < 2:
        raise PageRAGError(f"calibration needs at least {MIN_EXAMPLES} examples of both labels; got {len(y_)}")
    names = [SUFF_LOGIT, LLM_FEATURE]
    with_llm = held_out(X_, y_, g, names)
    without = held_out(X_[:, :1], y_, g, names[:1])
    ok = ~np.isnan(with_llm) & ~np.isnan(without)
    target = packaged(SUFFICIENCY).target_cwar if target_cwar is None else target_cwar
    model = RCSModel.fit(X_, y_, names, l2=l2_for(y_.size, PRIOR), target_cwar=target)
    model.curve = curve_of(with_llm[ok], y_[ok])
    model.tau = model.tau_for(target)
    report = {"backend": llm.name, "model": llm.model, "n": int(y_.size), "base_rate": float(y_.mean()),
              "books": sorted(set(books)), "target_cwar": target, "tau": model.tau,
              "held_out_auc_ac": {"reader model": auc_ac(without[ok], y_[ok]), "reader model + P(yes)": auc_ac(with_llm[ok], y_[ok])},
              "weights": dict(zip(names, (model.weights / model.std).round(4).tolist()))}
    model.training = {"fitted_by": "pagerag calibrate --llm", "sample": str(sample_path), **report}
    model.metrics = report["held_out_auc_ac"]
    return model, report
