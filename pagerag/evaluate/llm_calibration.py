"""`pagerag calibrate --llm BACKEND`: fit the LLM judge's threshold on pairs.

The judge (generate.window_judge) reads excerpts one at a time and answers from the best one when
its score reaches tau. Two judges (`generate.judge`): `pick` (the default) asks for the number of
the sentence that states the answer, or 0, and scores an excerpt by P(some sentence); it also asks
the question of a text that answers nothing, and the `null` score is how far the best excerpt
stands above that. `yesno` asks whether the excerpt states the answer and scores it by P(yes).
A stronger model than the project's local 1.5B says yes more sharply, a
weaker one less; tau is fitted for each backend and model on **pairs** from the 15 training books
(`generate/models/calibration_pairs.jsonl.gz`, made by `python -m pagerag.train.calibration_sample`):
each pair is one question with the excerpts the judge reads at question time in a book that
states its answer and in one that does not (an inserted answer, or its answer's sentences cut).
The wording is the same on both sides, so the fitted threshold can only gain by reading.

For each side the LLM gives P(yes) or P(some sentence) on each of its first
`generate.judge_windows` excerpts (one short call each, cached); the side's score is the best of
them (`max`), how far the best stands above the others (`contrast`, in logits: a small model's
P(yes) moves with the question's form, and within one question with the excerpt), or, for the
pick, above the control text (`null`) — whichever gets more pairs right held out by book. tau is
the threshold that gets the most pairs right on both sides (the book that says: score >= tau; the
book that does not:
below), among those that refuse at least `MIN_REFUSED` of the silent sides when one can. The
report gives the same figures held out by book (tau chosen on the other books), which is what to
expect on books the calibration never saw. The threshold is stored in the cache
(`<cache>/calibration/<backend>-<model>.pick.json`, `.windows.json` for yesno) and used by `ask`
with that backend, model and judge; uncalibrated, the pick uses the threshold packaged for the
local 1.5B (models/pick_decision.json) and yesno P(yes) >= 0.5.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import PageRAGError
from ..generate.window_judge import pick_score

MIN_PAIRS = 10
# how a side is scored from its excerpts' probabilities (window_judge.pick_score), by judge
SCORES = {"yesno": ("max", "contrast"), "pick": ("null", "max", "contrast")}
MIN_REFUSED = 0.6  # refused where the book does not say: the floor a threshold must keep when it can


def read_sample(path: Path) -> list[dict]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    except (OSError, ValueError) as exc:
        raise PageRAGError(f"{path}: cannot read the calibration sample ({exc.__class__.__name__})") from None


def side_scores(llm, row: dict, side: str, windows: int, judge: str,
                progress: Callable[[], None] | None = None) -> list[float]:
    """The LLM's P(yes) (yesno) or P(some sentence) (pick) on each of the side's first `windows`
    excerpts, as the judge asks it."""
    from ..generate.window_judge import judge_p_yes, pick_sentence
    from ..records import Excerpt, StageCost

    out = []
    for e in row[side][:windows]:
        excerpt = Excerpt(**e)
        if judge == "pick":
            out.append(pick_sentence(llm, row["question"], excerpt, StageCost()).p_yes)
        else:
            out.append(judge_p_yes(llm, row["question"], excerpt, StageCost()))
        if progress:
            progress()
    return out


def control_scores(llm, rows: list[dict], judge: str, progress: Callable[[], None] | None = None) -> list[float | None]:
    """The pick's P(some sentence) for each question on the text that answers nothing (None for yesno)."""
    from ..generate.window_judge import null_p_some
    from ..records import StageCost

    out: list[float | None] = []
    for row in rows:
        out.append(null_p_some(llm, row["question"], StageCost()) if judge == "pick" else None)
        if progress and judge == "pick":
            progress()
    return out


def calls_needed(rows: list[dict], windows: int, judge: str) -> int:
    """The LLM calls a calibration makes: one an excerpt, and for the pick one a question more."""
    excerpts = sum(min(windows, len(r["says"])) + min(windows, len(r["silent"])) for r in rows)
    return excerpts + (len(rows) if judge == "pick" else 0)


def pair_figures(says: np.ndarray, silent: np.ndarray, tau: float) -> dict[str, float]:
    """Answered where the book says, refused where it does not, both, at threshold tau."""
    answered, refused = says >= tau, silent < tau
    return {"answered_where_says": float(answered.mean()), "refused_where_not": float(refused.mean()),
            "both": float((answered & refused).mean())}


def choose_tau(says: np.ndarray, silent: np.ndarray) -> float:
    """The threshold with the most pairs right on both sides, among those refusing at least
    MIN_REFUSED of the silent sides (all thresholds when none does); ties: the higher one."""
    candidates = np.unique(np.concatenate([says, silent, [0.5]]))
    scored = []
    for tau in candidates:
        f = pair_figures(says, silent, tau)
        scored.append((f["refused_where_not"] >= MIN_REFUSED, f["both"], tau))
    floor_met = any(ok for ok, _, _ in scored)
    best = max((s for s in scored if s[0] or not floor_met), key=lambda s: (s[1], s[2]))
    return float(best[2])


def held_out(says: np.ndarray, silent: np.ndarray, books: np.ndarray) -> dict[str, float]:
    """Each book's pairs decided by the tau chosen on the other books; the figures over all."""
    answered = np.zeros(says.size, bool)
    refused = np.zeros(says.size, bool)
    for book in np.unique(books):
        other = books != book
        tau = choose_tau(says[other], silent[other]) if other.any() else 0.5
        answered[~other], refused[~other] = says[~other] >= tau, silent[~other] < tau
    return {"answered_where_says": float(answered.mean()), "refused_where_not": float(refused.mean()),
            "both": float((answered & refused).mean())}


def calibrate_llm(llm, sample_path: Path, windows: int, progress: Callable[[], None] | None = None,
                  limit: int | None = None, judge: str = "pick") -> tuple[dict, dict]:
    """The fitted decision of judge `judge` for `llm` ({"tau", "feature", ...}) and its report (pair
    figures, in sample and held out by book). `limit`: the first `limit` pairs of the sample (it
    interleaves the books)."""
    rows = read_sample(sample_path)[:limit]
    if len(rows) < MIN_PAIRS:
        raise PageRAGError(f"calibration needs at least {MIN_PAIRS} pairs; got {len(rows)}")
    says = [side_scores(llm, row, "says", windows, judge, progress) for row in rows]
    silent = [side_scores(llm, row, "silent", windows, judge, progress) for row in rows]
    nulls = control_scores(llm, rows, judge, progress)
    books = np.array([r["book"] for r in rows])
    by_feature = {}
    for feature in SCORES[judge]:
        s = np.array([pick_score(p, feature, c) for p, c in zip(says, nulls)])
        n = np.array([pick_score(p, feature, c) for p, c in zip(silent, nulls)])
        by_feature[feature] = {"tau": choose_tau(s, n), "held_out_by_book": held_out(s, n, books), "s": s, "n": n}
    # the score whose threshold, chosen without the book, gets the most pairs right held out (ties:
    # the judge's first, the simplest for yesno and the packaged one's for the pick)
    first = SCORES[judge][0]
    feature = max(SCORES[judge], key=lambda f: (by_feature[f]["held_out_by_book"]["both"], f == first))
    chosen = by_feature[feature]
    tau, s, n = chosen["tau"], chosen["s"], chosen["n"]
    report = {"backend": llm.name, "model": llm.model, "judge": judge, "pairs": len(rows), "windows": windows,
              "kinds": {k: sum(r["kind"] == k for r in rows) for k in sorted({r["kind"] for r in rows})},
              "books": sorted(set(books.tolist())), "feature": feature, "tau": tau, "in_sample": pair_figures(s, n, tau),
              "held_out_by_book": chosen["held_out_by_book"],
              "held_out_by_feature": {f: v["held_out_by_book"] for f, v in by_feature.items()},
              "wording_only": {"both": 0.0, "note": "the same decision on both sides of a pair gets at most one right"}}
    decision = {"tau": tau, "feature": feature, "fitted_by": "pagerag calibrate --llm", "sample": Path(sample_path).name,
                **report, "p_yes": [{"pair": r["pair"], "says": a, "silent": b, **({"null": c} if c is not None else {})}
                                    for r, a, b, c in zip(rows, says, silent, nulls)]}
    return decision, report


def save_decision(decision: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(decision, indent=1) + "\n", encoding="utf-8")
    return path
