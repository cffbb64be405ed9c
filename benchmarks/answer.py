"""Answer benchmark: correct refusals, false refusals, accuracy, latency and prompt tokens.

    python benchmarks/answer.py                                  # extractive, all 100 DEV questions
    python benchmarks/answer.py --llm llamacpp --limit 20        # the local 1.5B GGUF on a 20-question slice
    python benchmarks/answer.py --pipeline no-evidence-constraint --json out.json

Questions: $PAGERAG_DATA_DIR/qa/*.qa.jsonl (A Christmas Carol and the Cornwall journey; 30
answerable + 20 unanswerable each). Repositories are built once under --work and reused.
`--limit N` takes a balanced slice: N/4 questions from each of (book x answerable), evenly
spaced through the file so every question type is sampled.

Scores (as in the data set's README):
  correct refusal  unanswerable questions refused (any reason) / unanswerable questions
  false refusal    answerable questions refused / answerable questions
  strict accuracy  answerable questions answered with a gold answer or alias contained in the
                   answer (lower case, punctuation and runs of spaces folded) / answerable
  lenient accuracy the same with token recall of the gold answer >= 0.5 (no LLM judge here)
  BBS              2 * lenient * refusal / (lenient + refusal)
RCS gate (--gate): `auto`/`on`/`off` set generate.rcs_gate (`on` falls back to the packaged
multi-hop model); `cross` fits a model on the other book's answerable questions (pagerag
calibrate's labels and features) so the gate is tested out of sample.
Latency: median per stage over all questions (models already loaded: the first question of
each book is a warm-up and is not timed). Prompt tokens: LLM prompt tokens per question (judge +
answer), as reported by the backend.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

BOOKS = {
    "carol": ("books/christmas_carol.txt", "qa/christmas_carol.qa.jsonl"),
    "cornwall": ("graphrag-bench-novel/texts/Novel-44557.txt", "qa/cornwall.qa.jsonl"),
}
STOP = set("a an the of and or to in on at by for with from his her their its is was were be".split())


def data_dir() -> Path:
    found = os.environ.get("PAGERAG_DATA_DIR") or str(REPO_ROOT.parent / "shared" / "data")
    if not Path(found).is_dir():
        sys.exit("set PAGERAG_DATA_DIR to the shared data directory")
    return Path(found)


def ensure_repo(book: str, work: Path, data: Path) -> Path:
    from pagerag.build import build_repository
    from pagerag.repository import read_manifest
    from pagerag.settings import load_settings

    repo = work / f"{book}.rag"
    try:
        read_manifest(repo)
        return repo
    except Exception:  # noqa: BLE001 - not built yet (or damaged): build it
        pass
    started = time.perf_counter()
    build_repository([data / BOOKS[book][0]], repo, load_settings(environ={}), show_progress=False)
    print(f"built {repo} in {time.perf_counter() - started:.0f}s", file=sys.stderr)
    return repo


def load_questions(data: Path, limit: int | None) -> list[tuple[str, dict]]:
    per_book = {book: [json.loads(l) for l in (data / qa).read_text(encoding="utf-8").splitlines() if l.strip()]
                for book, (_, qa) in BOOKS.items()}
    if not limit:
        return [(book, q) for book, qs in per_book.items() for q in qs]
    # evenly spaced through each (book, answerable) group, so every question type is sampled
    groups = [[(book, q) for q in qs if q["answerable"] is answerable]
              for answerable in (True, False) for book, qs in per_book.items()]
    out: list[tuple[str, dict]] = []
    for g, group in enumerate(groups):
        share = limit // len(groups) + (g < limit % len(groups))
        step = len(group) / max(share, 1)
        out.extend(group[int(i * step)] for i in range(min(share, len(group))))
    return out


# --------------------------------------------------------------------------------------------
# Scoring


def normalise(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]+", " ", text.lower().replace("\u2019", "'")).split())


def strict_hit(answer: str, golds: list[str]) -> bool:
    norm = f" {normalise(answer)} "
    return any(f" {normalise(g)} " in norm for g in golds if normalise(g))


def lenient_hit(answer: str, golds: list[str]) -> bool:
    words = set(normalise(answer).split())
    for gold in golds:
        tokens = [t for t in normalise(gold).split() if t not in STOP]
        if tokens and sum(t in words for t in tokens) / len(tokens) >= 0.5:
            return True
    return strict_hit(answer, golds)


def summarise(rows: list[dict]) -> dict:
    ans = [r for r in rows if r["answerable"]]
    una = [r for r in rows if not r["answerable"]]
    refused_una = sum(r["decision"] == "refused" for r in una)
    refused_ans = sum(r["decision"] == "refused" for r in ans)
    strict = sum(r["decision"] == "answered" and r["strict"] for r in ans)
    lenient = sum(r["decision"] == "answered" and r["lenient"] for r in ans)
    ref = refused_una / len(una) if una else 0.0
    acc_l = lenient / len(ans) if ans else 0.0
    timed = [r for r in rows if not r["warmup"]]
    stages: dict[str, list[float]] = defaultdict(list)
    for r in timed:
        for stage, ms in r["latency_ms"].items():
            stages[stage].append(ms)
    return {
        "questions": len(rows), "answerable": len(ans), "unanswerable": len(una),
        "correct_refusal": [refused_una, len(una)], "false_refusal": [refused_ans, len(ans)],
        "strict_accuracy": strict / len(ans) if ans else 0.0, "lenient_accuracy": acc_l,
        "bbs": 2 * acc_l * ref / (acc_l + ref) if acc_l + ref else 0.0,
        "median_latency_ms": {s: round(statistics.median(v), 1) for s, v in stages.items()},
        "median_total_ms": round(statistics.median([sum(r["latency_ms"].values()) for r in timed]), 1) if timed else 0.0,
        "mean_total_ms": round(statistics.mean([sum(r["latency_ms"].values()) for r in timed]), 1) if timed else 0.0,
        "prompt_tokens_per_question": round(statistics.mean([r["prompt_tokens"] for r in rows]), 1) if rows else 0.0,
        "max_prompt_tokens": max((r["prompt_tokens"] for r in rows), default=0),
        "refusal_reasons": dict(Counter(r["reason"] for r in rows if r["reason"])),
        "judge_methods": dict(Counter(r["judge"] for r in rows)),
    }


# --------------------------------------------------------------------------------------------


def local_gguf() -> str:
    tool = REPO_ROOT.parent / "shared" / "tools" / "local-llm"
    run = subprocess.run([str(tool)], capture_output=True, text=True, timeout=1800)
    path = run.stdout.strip().splitlines()[-1] if run.returncode == 0 and run.stdout.strip() else ""
    if not path or not Path(path).is_file():
        sys.exit(f"{tool} gave no GGUF: {run.stderr.strip()[-300:]}")
    return path


def cross_book_models(work: Path, data: Path, pipeline: str) -> dict[str, str]:
    """For each book, an RCS model fitted on the OTHER book's answerable questions (label: every
    gold quote inside the final evidence), with the packaged model's features; never in-sample."""
    from pagerag.api import PageRAG
    from pagerag.confidence.calibrate import fit_from_labelled
    from pagerag.confidence.model import load_default_model
    from pagerag.evaluate.calibrate import evidence_contains_all, load_labelled_questions
    from pagerag.generate.gate import retrieval_features

    names = load_default_model().feature_names
    fitted: dict[str, str] = {}
    for book, (_, qa) in BOOKS.items():
        rag = PageRAG(ensure_repo(book, work, data), pipeline=pipeline, llm="extractive")
        rows, labels = [], []
        for q in load_labelled_questions(data / qa):
            retrieval = rag.retrieve(q["question"])
            rows.append(retrieval_features(retrieval, rag.state, rag.encode))
            labels.append(float(evidence_contains_all([e.text for e in retrieval.evidence], q["evidence"])))
        model = fit_from_labelled(rows, labels, rag.settings.confidence.target_cwar, feature_names=names,
                                  prior=rag.settings.confidence.l2_prior, description={"fitted_on": book})
        fitted[book] = str(model.save(work / f"rcs-fitted-on-{book}.json"))
        print(f"RCS model fitted on {book}: {int(sum(labels))}/{len(labels)} fully retrieved, tau {model.tau:.3f}",
              file=sys.stderr)
    other = {book: next(b for b in BOOKS if b != book) for book in BOOKS}
    return {book: fitted[other[book]] for book in BOOKS}


def run(args: argparse.Namespace) -> dict:
    from pagerag.api import PageRAG

    data = data_dir()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    questions = load_questions(data, args.limit)
    llm: dict = {"backend": args.llm}
    if args.llm == "llamacpp":
        llm.update(gguf=args.gguf or local_gguf(), threads=args.threads, n_ctx=args.n_ctx)
    generate = dict(json.loads(args.generate)) if args.generate else {}
    if args.gate in ("auto", "on", "off"):
        generate["rcs_gate"] = args.gate
    models = cross_book_models(work, data, args.pipeline) if args.gate == "cross" else {}
    rags = {}
    rows = []
    for book, q in questions:
        if book not in rags:
            sections = {"generate": generate} if generate else {}
            if book in models:
                sections["confidence"] = {"model_path": models[book]}
            rags[book] = PageRAG(ensure_repo(book, work, data), pipeline=args.pipeline, llm=llm, **sections)
            warm = True
        else:
            warm = False
        started = time.perf_counter()
        answer = rags[book].ask(q["question"])
        wall = (time.perf_counter() - started) * 1000
        row = {
            "id": q["id"], "book": book, "type": q["type"], "answerable": q["answerable"],
            "decision": answer.decision, "reason": answer.reason, "answer": answer.answer,
            "strict": strict_hit(answer.answer, q["answers"]) if q["answerable"] else False,
            "lenient": lenient_hit(answer.answer, q["answers"]) if q["answerable"] else False,
            "prompt_tokens": answer.prompt_tokens, "latency_ms": answer.latency_ms, "wall_ms": round(wall, 1),
            "judge": answer.verdict.method if answer.verdict else "-",
            "judge_score": answer.verdict.score if answer.verdict else None,
            "rule": answer.verdict.rule if answer.verdict else None,
            "rcs": answer.rcs, "tau": answer.tau, "warmup": warm,
        }
        rows.append(row)
        if args.verbose:
            mark = ("ok" if (row["decision"] == "refused") != q["answerable"] else "XX")
            print(f"{mark} {q['id']:<10} {row['decision']:<8} {str(row['reason'] or ''):<25} "
                  f"{row['prompt_tokens']:>5} tok {wall / 1000:6.1f}s  {row['answer'][:90]!r}", file=sys.stderr, flush=True)
    summary = summarise(rows)
    summary.update(pipeline=args.pipeline, llm=args.llm, limit=args.limit, gate=args.gate)
    return {"summary": summary, "rows": rows}


def sweep(rows: list[dict], agree: list[float], overrule: list[float]) -> list[dict]:
    """Scores for other P(yes) thresholds, from a run whose thresholds were 0 (every question
    the judge saw was answered, so its answer and P(yes) are on record)."""
    out = []
    for a in agree:
        for o in overrule:
            moved = []
            for r in rows:
                refused = r["decision"] == "refused" or (
                    r["judge"] == "logprob" and r["judge_score"] < (a if r["rule"] else o))
                moved.append({**r, "decision": "refused" if refused else "answered"})
            s = summarise(moved)
            out.append({"agree": a, "overrule": o, "correct_refusal": s["correct_refusal"],
                        "false_refusal": s["false_refusal"], "strict": s["strict_accuracy"],
                        "lenient": s["lenient_accuracy"], "bbs": s["bbs"]})
    return out


def print_sweep(table: list[dict]) -> None:
    print("P(yes) thresholds (rule agrees / rule overruled): correct refusal, false refusal, strict, lenient, BBS")
    for t in table:
        cr, fr = t["correct_refusal"], t["false_refusal"]
        print(f"  {t['agree']:.2f} / {t['overrule']:.2f}   {cr[0]:>2}/{cr[1]}  {fr[0]:>2}/{fr[1]}  "
              f"{t['strict']:.1%}  {t['lenient']:.1%}  {t['bbs']:.1%}")


def print_table(summary: dict) -> None:
    cr, fr = summary["correct_refusal"], summary["false_refusal"]
    print(f"pipeline {summary['pipeline']}, llm {summary['llm']}, RCS gate {summary['gate']}, {summary['questions']} questions "
          f"({summary['answerable']} answerable, {summary['unanswerable']} unanswerable)")
    print(f"{'correct refusal':<28}{cr[0]}/{cr[1]} ({cr[0] / max(cr[1], 1):.0%})")
    print(f"{'false refusal':<28}{fr[0]}/{fr[1]} ({fr[0] / max(fr[1], 1):.0%})")
    print(f"{'strict accuracy':<28}{summary['strict_accuracy']:.1%}")
    print(f"{'lenient accuracy':<28}{summary['lenient_accuracy']:.1%}")
    print(f"{'BBS':<28}{summary['bbs']:.1%}")
    print(f"{'prompt tokens / question':<28}{summary['prompt_tokens_per_question']:.0f} (max {summary['max_prompt_tokens']})")
    print(f"{'latency per question':<28}median {summary['median_total_ms'] / 1000:.2f} s, "
          f"mean {summary['mean_total_ms'] / 1000:.2f} s")
    print("median latency per stage (over the questions that reached it):")
    for stage, ms in summary["median_latency_ms"].items():
        print(f"  {stage:<26}{ms:.0f} ms")
    print(f"{'refusal reasons':<28}{summary['refusal_reasons']}")
    print(f"{'judge':<28}{summary['judge_methods']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="extractive", choices=["extractive", "llamacpp", "openai", "auto"])
    parser.add_argument("--pipeline", default="full")
    parser.add_argument("--limit", type=int, default=0, help="balanced slice of N questions (0 = all)")
    parser.add_argument("--gate", default="auto", choices=["auto", "on", "off", "cross"],
                        help="generate.rcs_gate auto/on/off, or cross: a model fitted on the other book")
    parser.add_argument("--work", default=str(Path(os.environ.get("PAGERAG_CACHE_DIR") or Path.home() / ".cache" / "pagerag")
                                              / "bench-answer"))
    parser.add_argument("--gguf", default="", help="GGUF for --llm llamacpp (default: ../shared/tools/local-llm)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--generate", default="", help='JSON overrides of the generate section, e.g. \'{"judge_threshold": 0.6}\'')
    parser.add_argument("--json", default="", help="write summary and per-question rows here")
    parser.add_argument("--sweep", action="store_true", help="also score other P(yes) thresholds (run with both "
                        "thresholds at 0: --generate '{\"judge_threshold\": 0, \"judge_threshold_overrule\": 0}')")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    result = run(args)
    print_table(result["summary"])
    if args.sweep:
        grid = [round(0.3 + 0.05 * i, 2) for i in range(11)]
        result["sweep"] = sweep(result["rows"], grid, grid)
        print_sweep([t for t in result["sweep"] if t["overrule"] >= t["agree"]])
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
