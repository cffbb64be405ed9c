"""Issue 29 experiment: after the pick, the LLM says the answer in a few words, checked against
the excerpt, instead of the picked sentence being the answer.

The pick (generate.judge = pick) decides well on training pairs (52.5% both right at the judge,
held out by book) but its answer, the picked sentence, holds the answer on about half the
answering sides: the model often names the sentence next to the one that states it
(docs/pairs.md). Here the conversation on the best excerpt goes on after the pick's number: the
model gives the answer in a few words, or NONE. The answer counts only when its content words are
all in the excerpt and one of them is not the question's (a small model invents); the citation is
the excerpt's sentence holding most of them. NONE or an answer that does not check out refuses.

Run on the packaged calibration pairs (training books only; both sides), the pick calls through
the LLM response cache (a calibration's cache makes them free):

    PAGERAG_LLM__GGUF=$(../shared/tools/local-llm) python benchmarks/pair_answer.py run --limit 40 --out ANS.jsonl
    python benchmarks/pair_answer.py report --out ANS.jsonl

Each side is decided by the pick's `null` score at a threshold chosen on the other books (held out
by book) for the answer-level figure of each answer kind.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from pair_pick import append_records, write_decision  # noqa: E402  (the pick's run loop, decision and its file)
from pagerag.evaluate.llm_calibration import held_out_sides  # noqa: E402

SAMPLE = ROOT / "pagerag" / "generate" / "models" / "calibration_pairs.jsonl.gz"
def read_side(llm, question: str, excerpts: list[dict], windows: int) -> dict:
    """The pick on each excerpt, then the short answer asked of the best one as the ask path asks
    it (window_judge.short_answer); whether it checks out is decided in `report`."""
    from pagerag.generate.window_judge import pick_sentence, short_answer
    from pagerag.records import Excerpt, StageCost

    cost = StageCost()
    readings = [pick_sentence(llm, question, Excerpt(**e), cost) for e in excerpts[:windows]]
    best = int(np.argmax([r.p_yes for r in readings]))
    r = readings[best]
    picked = r.excerpt.text[r.quote[0] - r.excerpt.start: r.quote[1] - r.excerpt.start] if r.quote else ""
    started = time.perf_counter()
    short = short_answer(llm, question, r, cost)
    return {"p_some": [x.p_yes for x in readings], "best": best, "picked": " ".join(picked.split()),
            "short": short, "answer_seconds": round(time.perf_counter() - started, 2)}


def run(args) -> None:
    from pagerag.evaluate.llm_calibration import read_sample
    from pagerag.generate.window_judge import null_p_some
    from pagerag.llm.registry import get_llm
    from pagerag.records import StageCost
    from pagerag.settings import load_settings

    llm = get_llm(load_settings().llm)

    def read(row: dict, rec: dict) -> None:
        rec["null"] = null_p_some(llm, row["question"], StageCost())
        for side in ("says", "silent"):
            rec[side] = read_side(llm, row["question"], row[side], args.windows)

    append_records(Path(args.out), read_sample(Path(args.sample))[: args.limit], read)


def tried(side: dict, tries: int) -> list[tuple[int, str]]:
    """(excerpt index, short answer) in the order asked, the first `tries` of them (`more`'s
    records hold several; a `run`'s the best excerpt's only)."""
    return [tuple(t) for t in (side.get("tries") or [[side["best"], side["short"]]])[:tries]]


def answering(side: dict, question: str, tries: int) -> tuple[int, str] | None:
    """(excerpt index, short answer) of the first tried excerpt whose short answer checks out as
    the ask path checks it (window_judge.stating_sentence), or None."""
    from pagerag.generate.window_judge import stating_sentence

    for at, short in tried(side, tries):
        if stating_sentence(short, question, side["excerpts"][at]) is not None:
            return at, short
    return None


def side_score(side: dict, null: float, question: str = "", tries: int = 1, score_by: str = "best") -> float:
    """The pick's null-relative score of the side: its best excerpt's P(some sentence), or with
    score_by="answering" that of the excerpt whose short answer checks out (the best's if none)."""
    from pagerag.generate.window_judge import pick_score

    found = answering(side, question, tries) if score_by == "answering" else None
    return pick_score([side["p_some"][found[0]]] if found else side["p_some"], "null", null)


def answer_of(side: dict, kind: str, question: str, tries: int = 1) -> str:
    """The answer shown by pick_answer mode `kind`; "" refuses: the first of the `tries` short
    answers that checks out (excerpts set by `with_excerpts`), else the named sentence (off,
    prefer) or nothing (require)."""
    found = answering(side, question, tries) if kind != "off" else None
    if found:
        return found[1]
    return side["picked"] if kind in ("off", "prefer") else ""


def extend_records(args, extend: Callable[..., None]) -> None:
    """A run's records (--out, their excerpts from the sample) written to --to with `extend(llm,
    record)` applied, one record at a time and flushed, so an interrupted run goes on where it
    stopped (records already in --to are skipped)."""
    from pagerag.llm.registry import get_llm
    from pagerag.settings import load_settings

    llm = get_llm(load_settings().llm)
    recs = read_records(args)
    done = {json.loads(l)["pair"] for l in Path(args.to).read_text().splitlines()} if Path(args.to).exists() else set()
    with open(args.to, "a") as fh:
        for n, r in enumerate(recs, 1):
            if r["pair"] in done:
                continue
            started = time.perf_counter()
            extend(llm, r)
            for name in ("says", "silent"):
                del r[name]["excerpts"]
            fh.write(json.dumps(r) + "\n")
            fh.flush()
            print(f"{n}/{len(recs)} {r['pair']} {time.perf_counter() - started:.1f} s", flush=True)


def more(args) -> None:
    """Each side whose short answer does not check out asked again, of its next best excerpt (up
    to --answer-excerpts in all), in that excerpt's own pick conversation (the pick calls come
    from the response cache); records written to --to with each side's `tries`."""
    from pagerag.generate.window_judge import pick_sentence, short_answer, stating_sentence
    from pagerag.records import StageCost

    def extend(llm, r: dict) -> None:
        for name in ("says", "silent"):
            side = r[name]
            side["tries"] = tries = [[side["best"], side["short"]]]
            order = sorted(range(len(side["p_some"])), key=lambda k: -side["p_some"][k])  # as first_stated_answer
            for at in order[1:args.answer_excerpts]:
                if stating_sentence(tries[-1][1], r["question"], side["excerpts"][tries[-1][0]]) is not None:
                    break
                reading = pick_sentence(llm, r["question"], side["excerpts"][at], StageCost())
                tries.append([at, short_answer(llm, r["question"], reading, StageCost())])

    extend_records(args, extend)


def confirm(args) -> None:
    """Each tried short answer that checks out read again (window_judge.confirm_p_yes: do its
    sentence and the one before it say it answers the question?); records written to --to with
    each side's `confirm`, one P(yes) per try (None where the answer did not check out). A run's
    values are kept: only the missing ones are asked."""
    from pagerag.generate.window_judge import confirm_p_yes, stating_sentence
    from pagerag.records import StageCost

    def extend(llm, r: dict) -> None:
        for name in ("says", "silent"):
            side = r[name]
            before = side.get("confirm") or []
            side["confirm"] = []
            for i, (at, short) in enumerate(tried(side, args.answer_excerpts)):
                span = stating_sentence(short, r["question"], side["excerpts"][at])
                known = before[i] if i < len(before) else None
                side["confirm"].append(None if span is None else known if known is not None else
                                       confirm_p_yes(llm, r["question"], short, side["excerpts"][at], span, StageCost()))

    extend_records(args, extend)


def fresh(args) -> None:
    """Where no short answer of the first --answer-excerpts tries checks out and is confirmed
    (>= --confirm-at), the best excerpt asked once more in a new conversation, without the pick's
    number (window_judge.answer_anew, prompts/answer_excerpt), and that answer, when it checks
    out, read again (confirm_p_yes); records written to --to with each side's `fresh`: [answer,
    P(yes)], P(yes) None where it does not check out. A run's answers are kept (only the missing
    ones are asked, and the second reading of a kept answer that checks out now)."""
    from pagerag.generate.window_judge import answer_anew, confirm_p_yes, stating_sentence
    from pagerag.records import StageCost

    def extend(llm, r: dict) -> None:
        says, silent = checked_lists([r], args.answer_excerpts)
        for name, stated in (("says", says[0]), ("silent", silent[0])):
            side = r[name]
            if any(p is not None and p >= args.confirm_at for _, p in stated):
                side["fresh"] = None  # not asked: ask would not get this far
            elif side.get("fresh") is None or side["fresh"][1] is None:  # a recorded answer is read again only
                excerpt = side["excerpts"][int(np.argmax(side["p_some"]))]
                short = side["fresh"][0] if side.get("fresh") else answer_anew(llm, r["question"], excerpt, StageCost())
                span = stating_sentence(short, r["question"], excerpt)
                side["fresh"] = [short, None if span is None else
                                 confirm_p_yes(llm, r["question"], short, excerpt, span, StageCost())]

    extend_records(args, extend)


def sides(recs: list[dict], kind: str, tries: int = 1, score_by: str = "best") -> tuple[np.ndarray, ...]:
    """Per pair: the says and silent sides' scores, whether the says side's answer (pick_answer
    mode `kind`) is right, and whether the silent side has an answer to give."""
    from pagerag.evaluate.scoring import lenient_by_recall

    says = np.array([side_score(r["says"], r["null"], r["question"], tries, score_by) for r in recs])
    silent = np.array([side_score(r["silent"], r["null"], r["question"], tries, score_by) for r in recs])
    says_ans = [answer_of(r["says"], kind, r["question"], tries) for r in recs]
    right = np.array([bool(a) and lenient_by_recall(a, r["answers"]) for a, r in zip(says_ans, recs)])
    silent_gives = np.array([bool(answer_of(r["silent"], kind, r["question"], tries)) for r in recs])
    return says, silent, right, silent_gives


def checked_lists(recs: list[dict], tries: int, with_fresh: bool = False) -> tuple[list, list]:
    """Per pair, each side's short answers that check out among its first `tries`, with their
    second reading's P(yes) (`confirm`'s records; None without them): what
    llm_calibration.confirm_variants takes, as `pagerag calibrate --llm` computes it."""
    from pagerag.generate.window_judge import stating_sentence

    def checked(side: dict, question: str) -> list[tuple[str, float | None]]:
        readings = side.get("confirm") or [None] * len(tried(side, tries))
        out = [(short, p) for (at, short), p in zip(tried(side, tries), readings)
               if stating_sentence(short, question, side["excerpts"][at]) is not None]
        if "confirm" in side and any(p is None for _, p in out):
            raise SystemExit("error: an answer of these records checks out now but was never read again: run "
                             "`confirm` (then `fresh`) on them with this checkout")
        if with_fresh and side.get("fresh") and side["fresh"][1] is not None:  # `fresh`'s answer, tried last
            out.append(tuple(side["fresh"]))
        return out

    return [checked(r["says"], r["question"]) for r in recs], [checked(r["silent"], r["question"]) for r in recs]


def confirmed(args) -> None:
    """Both sides right held out by book when an answer must also pass its second reading: each
    confirm threshold of the calibration's grid (tau chosen on the other books), and both chosen
    on the other books (nested: llm_calibration.confirmed_sides, as `pagerag calibrate --llm`
    reports it), over all pairs and by kind of pair."""
    from pagerag.evaluate.llm_calibration import CONFIRM_GRID, confirm_variants, confirmed_sides

    recs = read_records(args)
    books = np.array([r["book"] for r in recs])
    says, silent = sides(recs, "require", args.answer_excerpts)[:2]
    variants = confirm_variants(*checked_lists(recs, args.answer_excerpts, args.fresh), [r["answers"] for r in recs])
    print(f"{len(recs)} pairs, {len(set(books))} books, {args.answer_excerpts} answer excerpts")
    print("| confirm threshold | right where the book says | refused where it does not | **both** |")
    print("|---|---:|---:|---:|")
    for c in CONFIRM_GRID:
        answered, refused = held_out_sides(says, silent, books, *variants[c])
        print(f"| {c if c is not None else 'none (no second reading)'} | {100 * answered.mean():.1f} | "
              f"{100 * refused.mean():.1f} | **{100 * (answered & refused).mean():.1f}** |")
    answered, refused = confirmed_sides(says, silent, books, variants)  # as held_out_confirmed decides them
    kinds = np.array([r["kind"] for r in recs])
    rows = [("chosen with tau on the other books (nested)", np.ones(len(recs), bool))] + \
        [(f"… {kind} pairs ({(kinds == kind).sum()})", kinds == kind) for kind in sorted(set(kinds))]
    for name, k in rows:
        print(f"| {name} | {100 * answered[k].mean():.1f} | {100 * refused[k].mean():.1f} | "
              f"**{100 * (answered & refused)[k].mean():.1f}** |")


def figures(recs: list[dict], kind: str, tau: float | None = None, tries: int = 1, score_by: str = "best") -> dict:
    says, silent, right, silent_gives = sides(recs, kind, tries, score_by)
    says_ans_given = [bool(answer_of(r["says"], kind, r["question"], tries)) for r in recs]
    books = np.array([r["book"] for r in recs])
    answered, refused = held_out_sides(says, silent, books, right, silent_gives, tau)
    return {"right": answered.mean(), "refused": refused.mean(), "both": (answered & refused).mean(),
            "answer_right_on_says": right.mean(), "checked_says": np.mean(says_ans_given),
            "checked_silent": silent_gives.mean()}


def answers_given(recs: list[dict], kind: str, tau: float, tries: int = 1, score_by: str = "best") -> tuple[int, int, int]:
    """(answers given on either side, right ones, given where the book is silent) at threshold tau."""
    from pagerag.evaluate.scoring import lenient_by_recall

    given = right = silent = 0
    for r in recs:
        for side in ("says", "silent"):
            answer = answer_of(r[side], kind, r["question"], tries)
            if answer and side_score(r[side], r["null"], r["question"], tries, score_by) >= tau:
                given += 1
                right += side == "says" and lenient_by_recall(answer, r["answers"])
                silent += side == "silent"
    return given, right, silent


def read_records(args) -> list[dict]:
    """A run's records (--out), each side with the excerpts it read (from --sample)."""
    return with_excerpts([json.loads(line) for line in Path(args.out).read_text().splitlines()], Path(args.sample))


def with_excerpts(recs: list[dict], sample: Path) -> list[dict]:
    """Each side's record with the excerpts it read (from the sample)."""
    from pagerag.evaluate.llm_calibration import read_sample
    from pagerag.records import Excerpt

    rows = {row["pair"]: row for row in read_sample(sample)}
    for r in recs:
        for side in ("says", "silent"):
            r[side]["excerpts"] = [Excerpt(**e) for e in rows[r["pair"]][side]]
    return recs


def report(args) -> None:
    recs = read_records(args)[args.first:]
    secs = [r[s]["answer_seconds"] for r in recs for s in ("says", "silent")]
    print(f"{len(recs)} pairs, {len({r['book'] for r in recs})} books; answer call median {np.median(secs):.1f} s")
    print("| answer | right where the book says | refused where it does not | **both** | answer right on says sides"
          " (any score) | answer given: says / silent sides |")
    print("|---|---:|---:|---:|---:|---|")
    names = {"off": "the named sentence (off)",
             "prefer": "the short answer when it checks out, else the named sentence (prefer)",
             "require": "the short answer when it checks out, else refused (require, the default)"}
    from pagerag.generate.models import pick_decision

    packaged = float(pick_decision()["tau"])
    for tau, title in ((None, "held out by book"), (packaged, f"at the packaged threshold (null, tau {packaged:.3f})")):
        for kind, name in names.items():
            f = figures(recs, kind, tau, args.answer_excerpts, args.score_by)
            print(f"| {name}, {title} | {100 * f['right']:.1f} | {100 * f['refused']:.1f} | **{100 * f['both']:.1f}** | "
                  f"{100 * f['answer_right_on_says']:.0f}% | {100 * f['checked_says']:.0f}% / {100 * f['checked_silent']:.0f}% |")
    print(f"\nAt the packaged threshold, over both sides of the {len(recs)} pairs:")
    print("| answer | answers given | right | share right | given where the book is silent |")
    print("|---|---:|---:|---:|---:|")
    for kind, name in names.items():
        given, right, silent = answers_given(recs, kind, packaged, args.answer_excerpts, args.score_by)
        print(f"| {name} | {given} | {right} | {100 * right / max(1, given):.0f}% | {silent} |")
    if args.show:
        for r in recs:
            print(r["pair"], "|", r["question"], "| gold:", r["answers"][:2])
            for s in ("says", "silent"):
                print(f"   {s}: short={r[s]['short']!r} given={answer_of(r[s], 'require', r['question'], args.answer_excerpts)!r} "
                      f"picked={r[s]['picked'][:80]!r}")


def fit(args) -> None:
    """The pick's threshold for the answers `generate.pick_answer = require` gives (the short
    answer when it checks out, else none) and, on `confirm`'s records, the threshold its second
    reading must reach: those with the most pairs right on both sides, on every pair of the run
    (llm_calibration.choose_confirmed, as `pagerag calibrate --llm`); shipped
    (generate/models/pick_decision.json) with --write."""
    from pagerag.evaluate.llm_calibration import CONFIRM_GRID, choose_confirmed, confirm_variants

    recs = read_records(args)
    says, silent = sides(recs, "require", args.answer_excerpts)[:2]
    grid = CONFIRM_GRID if all("confirm" in r["says"] for r in recs) else (None,)
    variants = confirm_variants(*checked_lists(recs, args.answer_excerpts, args.fresh), [r["answers"] for r in recs], grid)
    confirm_at, tau, both = choose_confirmed(says, silent, variants)
    write_decision("null", tau, both, recs, f"python benchmarks/pair_answer.py fit --out {Path(args.out).name} "
                   f"--answer-excerpts {args.answer_excerpts}" + (" --fresh" if args.fresh else ""), args.write, confirm_at)


def where(args) -> None:
    """On the answering sides without a right checked answer (at --answer-excerpts): how many
    hold a gold answer string in their best excerpt, in the second best, in any of them; and how
    many have no short answer that checks out at all, with a gold string in the best excerpt."""
    from pagerag.evaluate.scoring import lenient_by_recall

    recs = read_records(args)
    wrong = best = second = anywhere = unchecked = unchecked_best = 0
    for r in recs:
        side = r["says"]
        answer = answer_of(side, "require", r["question"], args.answer_excerpts)
        if answer and lenient_by_recall(answer, r["answers"]):
            continue
        order = sorted(range(len(side["p_some"])), key=lambda k: -side["p_some"][k])
        holds = [any(g.lower() in e.text.lower() for g in r["answers"]) for e in side["excerpts"][:len(order)]]
        wrong, best, anywhere = wrong + 1, best + holds[order[0]], anywhere + any(holds)
        second += len(order) > 1 and holds[order[1]]
        if not answer:  # no tried short answer checks out at all
            unchecked, unchecked_best = unchecked + 1, unchecked_best + holds[order[0]]
    print(f"{len(recs)} pairs; answering sides without a right checked answer: {wrong}; a gold answer string in the "
          f"best excerpt {best}, in the second best {second}, in any {anywhere}; of them, no short answer checks out: "
          f"{unchecked}, a gold answer string in the best excerpt {unchecked_best}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--sample", default=str(SAMPLE))
    r.add_argument("--limit", type=int, default=40)
    r.add_argument("--windows", type=int, default=4)
    r.add_argument("--out", required=True)
    p = sub.add_parser("report")
    p.add_argument("--out", required=True)
    p.add_argument("--show", action="store_true", help="every pair's answers")
    p.add_argument("--sample", default=str(SAMPLE))
    p.add_argument("--first", type=int, default=0, help="report the records from this one on (0-based)")
    f = sub.add_parser("fit", help="the shipped pick threshold, for the require answers of a run's pairs")
    f.add_argument("--out", required=True)
    f.add_argument("--sample", default=str(SAMPLE))
    f.add_argument("--write", action="store_true")
    f.add_argument("--fresh", action="store_true", help="`fresh`'s answer tried after the others (generate.answer_anew)")
    m = sub.add_parser("more", help="ask the next best excerpt for the short answer where the best one's does not check out")
    m.add_argument("--out", required=True, help="a run's records")
    m.add_argument("--to", required=True, help="the records with each side's tries")
    m.add_argument("--sample", default=str(SAMPLE))
    c = sub.add_parser("confirm", help="each checked short answer read again: does its sentence say it answers the question?")
    c.add_argument("--out", required=True, help="a run's records (with tries)")
    c.add_argument("--to", required=True, help="the records with each side's confirm P(yes)")
    c.add_argument("--sample", default=str(SAMPLE))
    cf = sub.add_parser("confirmed", help="held-out figures with the second reading's threshold (nested)")
    cf.add_argument("--out", required=True, help="`confirm`'s records")
    cf.add_argument("--sample", default=str(SAMPLE))
    cf.add_argument("--fresh", action="store_true", help="`fresh`'s answer tried after the others")
    fr = sub.add_parser("fresh", help="the best excerpt asked once more without the pick's number (generate.answer_anew)")
    fr.add_argument("--out", required=True, help="`confirm`'s records")
    fr.add_argument("--to", required=True)
    fr.add_argument("--sample", default=str(SAMPLE))
    fr.add_argument("--confirm-at", type=float, default=0.65)
    w = sub.add_parser("where", help="where the gold answer is, on the answering sides without a right checked answer")
    w.add_argument("--out", required=True)
    w.add_argument("--sample", default=str(SAMPLE))
    for q in (p, f, m, w, c, cf, fr):
        q.add_argument("--answer-excerpts", type=int, default=1, help="how many of the best excerpts may give the short answer")
    p.add_argument("--score-by", choices=("best", "answering"), default="best",
                   help="a side's score: its best excerpt's, or the excerpt's whose short answer checks out")
    args = ap.parse_args()
    {"run": run, "report": report, "fit": fit, "more": more, "where": where, "confirm": confirm, "confirmed": confirmed, "fresh": fresh}[args.cmd](args)


if __name__ == "__main__":
    main()
