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
below), among those that refuse at least `MIN_REFUSED` of the silent sides when one can. With
the pick and `generate.pick_answer = require` (the defaults) it is fitted for the answers `ask`
gives: a side answers only with a short answer that checks out (window_judge.first_stated_answer,
one more call a side, more with `generate.answer_excerpts`), and the book that says counts only
when that answer is right (the sample's answer strings); each checked answer is also read again
(`generate.confirm_answer`), and the threshold that second reading must reach is chosen with tau
(nested in the held-out figures). The
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
                progress: Callable[[], None] | None = None) -> tuple[list[float], list]:
    """The LLM's P(yes) (yesno) or P(some sentence) (pick) on each of the side's first `windows`
    excerpts, as the judge asks it, with the pick's readings (for its short answer; [] for yesno)."""
    from ..generate.window_judge import judge_p_yes, pick_sentence
    from ..records import Excerpt, StageCost

    scores, readings = [], []
    for e in row[side][:windows]:
        excerpt = Excerpt(**e)
        if judge == "pick":
            readings.append(pick_sentence(llm, row["question"], excerpt, StageCost()))
            scores.append(readings[-1].p_yes)
        else:
            scores.append(judge_p_yes(llm, row["question"], excerpt, StageCost()))
        if progress:
            progress()
    return scores, readings


def stated_answers(llm, rows: list[dict], readings: list[list], tries: int, confirm: bool = True, anew: bool = False,
                   progress: Callable[[], None] | None = None) -> list[list[tuple[str, float | None]]]:
    """Per side, every short answer of its `tries` best excerpts that checks out, in the order `ask`
    tries them, with P(yes) of its second reading when `confirm` (window_judge.stated_answers):
    which one `ask` gives depends on the confirm threshold, fitted from these."""
    from ..generate.window_judge import stated_answers as checked
    from ..records import StageCost

    out = []
    for row, side in zip(rows, readings):
        out.append([(a.answer, a.confirmed) for a in checked(llm, row["question"], side, StageCost(), tries, confirm, anew)])
        if progress:
            progress()
    return out


# the confirm thresholds a calibration chooses among (None: an answer that checks out is given unread)
CONFIRM_GRID = (None, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)


def given_answer(stated: list[tuple[str, float | None]], confirm_at: float | None) -> str | None:
    """The answer `ask` gives from a side's checked answers at confirm threshold `confirm_at`."""
    return next((a for a, p in stated if confirm_at is None or p >= confirm_at), None)


def confirm_variants(says: list[list[tuple[str, float | None]]], silent: list[list[tuple[str, float | None]]],
                     golds: list[list[str]], grid=CONFIRM_GRID) -> dict[float | None, tuple[np.ndarray, np.ndarray]]:
    """Per confirm threshold of `grid`: (the says side's answer is right, the silent side gives one)."""
    from .scoring import lenient_by_recall

    out = {}
    for c in grid:
        right = [(a := given_answer(s, c)) is not None and lenient_by_recall(a, g) for s, g in zip(says, golds)]
        out[c] = np.array(right, bool), np.array([given_answer(n, c) is not None for n in silent], bool)
    return out


def choose_confirmed(says: np.ndarray, silent: np.ndarray, variants: dict) -> tuple[float | None, float, float]:
    """(confirm threshold, tau, both right) with the most pairs right on both sides; ties: the
    first threshold of the grid (no second reading first)."""
    best = None
    for c, (right, gives) in variants.items():
        tau = choose_tau(says, silent, right, gives)
        both = pair_figures(says, silent, tau, right, gives)["both"]
        if best is None or both > best[2]:
            best = (c, tau, both)
    return best


def held_out_confirmed(says: np.ndarray, silent: np.ndarray, books: np.ndarray, variants: dict) -> dict[str, float]:
    """Each book's pairs decided by the confirm threshold and tau chosen on the other books (nested)."""
    answered, refused = confirmed_sides(says, silent, books, variants)
    return {"answered_where_says": float(answered.mean()), "refused_where_not": float(refused.mean()),
            "both": float((answered & refused).mean())}


def confirmed_sides(says: np.ndarray, silent: np.ndarray, books: np.ndarray,
                    variants: dict) -> tuple[np.ndarray, np.ndarray]:
    """pair_sides with each book's pairs decided by the variant (confirm threshold) and tau chosen
    on the other books (a single book: the first variant at 0.5)."""
    answered, refused = np.zeros(says.size, bool), np.zeros(says.size, bool)
    for book in np.unique(books):
        held, other = books == book, books != book
        c, tau = choose_confirmed(says[other], silent[other], {k: (r[other], g[other]) for k, (r, g) in variants.items()})[:2] \
            if other.any() else (next(iter(variants)), 0.5)
        right, gives = variants[c]
        answered[held], refused[held] = pair_sides(says[held], silent[held], tau, right[held], gives[held])
    return answered, refused


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
    """The LLM calls a calibration makes before the short answers: one an excerpt, and for the
    pick one a question more."""
    excerpts = sum(min(windows, len(r["says"])) + min(windows, len(r["silent"])) for r in rows)
    return excerpts + (len(rows) if judge == "pick" else 0)


def _all(flags: np.ndarray | None, like: np.ndarray) -> np.ndarray:
    return np.ones(like.size, bool) if flags is None else np.asarray(flags, bool)


def pair_sides(says: np.ndarray, silent: np.ndarray, tau: float, right: np.ndarray | None = None,
               gives: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per pair at threshold tau: (answered right where the book says, refused where it does not).
    A side answers when its score reaches tau and, when given, `right` (the says side's answer is
    right) / `gives` (the silent side has an answer that checks out); default: every answer counts."""
    answered = (says >= tau) & _all(right, says)
    refused = ~((silent >= tau) & _all(gives, silent))
    return answered, refused


def pair_figures(says: np.ndarray, silent: np.ndarray, tau: float, right: np.ndarray | None = None,
                 gives: np.ndarray | None = None) -> dict[str, float]:
    """Answered (right) where the book says, refused where it does not, both, at threshold tau."""
    answered, refused = pair_sides(says, silent, tau, right, gives)
    return {"answered_where_says": float(answered.mean()), "refused_where_not": float(refused.mean()),
            "both": float((answered & refused).mean())}


def choose_tau(says: np.ndarray, silent: np.ndarray, right: np.ndarray | None = None,
               gives: np.ndarray | None = None) -> float:
    """The threshold with the most pairs right on both sides, among those refusing at least
    MIN_REFUSED of the silent sides (all thresholds when none does); ties: the higher one."""
    candidates = np.unique(np.concatenate([says, silent, [0.5]]))
    scored = []
    for tau in candidates:
        f = pair_figures(says, silent, tau, right, gives)
        scored.append((f["refused_where_not"] >= MIN_REFUSED, f["both"], tau))
    floor_met = any(ok for ok, _, _ in scored)
    best = max((s for s in scored if s[0] or not floor_met), key=lambda s: (s[1], s[2]))
    return float(best[2])


def held_out_sides(says: np.ndarray, silent: np.ndarray, books: np.ndarray, right: np.ndarray | None = None,
                   gives: np.ndarray | None = None, tau: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """pair_sides with each book's pairs decided by the tau chosen on the other books (or at `tau`)."""
    right, gives = _all(right, says), _all(gives, silent)
    if tau is not None:
        return pair_sides(says, silent, tau, right, gives)
    return confirmed_sides(says, silent, books, {None: (right, gives)})


def calibrate_llm(llm, sample_path: Path, windows: int, progress: Callable[[], None] | None = None,
                  limit: int | None = None, judge: str = "pick", answer_tries: int = 0,
                  confirm: bool = True, anew: bool = False) -> tuple[dict, dict]:
    """The fitted decision of judge `judge` for `llm` ({"tau", "feature", ...}) and its report (pair
    figures, in sample and held out by book). `limit`: the first `limit` pairs of the sample (it
    interleaves the books). `answer_tries` > 0 (the pick with `generate.pick_answer = require`):
    a side answers only with a short answer that checks out (from the best `answer_tries`
    excerpts, as `ask` asks it), and a pair counts on the answering side only when that answer is
    right (the sample's answer strings) -- the threshold is fitted for the answers `ask` gives; with
    `confirm`, each checked answer is read again (window_judge.confirm_p_yes) and the threshold
    that reading must reach is chosen with tau (CONFIRM_GRID; nested in the held-out figures)."""

    rows = read_sample(sample_path)[:limit]
    if len(rows) < MIN_PAIRS:
        raise PageRAGError(f"calibration needs at least {MIN_PAIRS} pairs; got {len(rows)}")
    says, says_read = zip(*[side_scores(llm, row, "says", windows, judge, progress) for row in rows])
    silent, silent_read = zip(*[side_scores(llm, row, "silent", windows, judge, progress) for row in rows])
    nulls = control_scores(llm, rows, judge, progress)
    books = np.array([r["book"] for r in rows])
    # without checked answers every answer counts: one variant, right and gives all true
    variants = {None: (np.ones(len(rows), bool), np.ones(len(rows), bool))}
    if answer_tries and judge == "pick":
        said = stated_answers(llm, rows, list(says_read), answer_tries, confirm, anew, progress)
        variants = confirm_variants(said, stated_answers(llm, rows, list(silent_read), answer_tries, confirm, anew, progress),
                                    [r["answers"] for r in rows], CONFIRM_GRID if confirm else (None,))
    by_feature = {}
    for feature in SCORES[judge]:
        s = np.array([pick_score(p, feature, c) for p, c in zip(says, nulls)])
        n = np.array([pick_score(p, feature, c) for p, c in zip(silent, nulls)])
        confirm_at, tau, _ = choose_confirmed(s, n, variants)
        by_feature[feature] = {"tau": tau, "confirm_at": confirm_at, "s": s, "n": n,
                               "held_out_by_book": held_out_confirmed(s, n, books, variants)}
    # the score whose thresholds, chosen without the book, get the most pairs right held out (ties:
    # the judge's first, the simplest for yesno and the packaged one's for the pick)
    first = SCORES[judge][0]
    feature = max(SCORES[judge], key=lambda f: (by_feature[f]["held_out_by_book"]["both"], f == first))
    chosen = by_feature[feature]
    tau, s, n, confirm_at = chosen["tau"], chosen["s"], chosen["n"], chosen["confirm_at"]
    checked = answer_tries and judge == "pick"
    right, gives = variants[confirm_at] if checked else (None, None)
    report = {"backend": llm.name, "model": llm.model, "judge": judge, "pairs": len(rows), "windows": windows,
              "fitted_for": "checked answers" if right is not None else "the judge's decision",
              "kinds": {k: sum(r["kind"] == k for r in rows) for k in sorted({r["kind"] for r in rows})},
              "books": sorted(set(books.tolist())), "feature": feature, "tau": tau,
              "in_sample": pair_figures(s, n, tau, right, gives), "held_out_by_book": chosen["held_out_by_book"],
              "held_out_by_feature": {f: v["held_out_by_book"] for f, v in by_feature.items()},
              "wording_only": {"both": 0.0, "note": "the same decision on both sides of a pair gets at most one right"}}
    if right is not None:
        report["answer_tries"] = answer_tries
        report["confirm_at"] = confirm_at
    flags = zip(_all(right, books), _all(gives, books))
    per_pair = [{"pair": r["pair"], "says": list(a), "silent": list(b), **({"null": c} if c is not None else {}),
                 **({"says_right": bool(x), "silent_gives": bool(y)} if right is not None else {})}
                for r, a, b, c, (x, y) in zip(rows, says, silent, nulls, flags)]
    decision = {"tau": tau, "feature": feature, **({"confirm_at": confirm_at} if confirm_at is not None else {}),
                "fitted_by": "pagerag calibrate --llm", "sample": Path(sample_path).name,
                **report, "p_yes": per_pair}
    return decision, report


def save_decision(decision: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(decision, indent=1) + "\n", encoding="utf-8")
    return path
