"""Answer-or-refuse on pairs: the same question asked of a book that states its answer and of one
that does not (pagerag.train.pairs). The wording is identical on both sides, so a decision made
from the question's form gets at most one side of each pair right; only reading gets both.

    python -m pagerag.train.pairs --books train --out PAIRS              # the pairs and their texts
    python -m pagerag.train.pairs --books test --cut-only --out PAIRS_TEST   # report only
    python benchmarks/pair_qa.py make-dev --pairs PAIRS_DEV              # DEV inserts (benchmarks/pairs/), report only
    python benchmarks/pair_qa.py build --pairs PAIRS --repos PREPOS      # a repository per side
    python benchmarks/pair_qa.py run --pairs PAIRS --repos PREPOS --out OUT [--system extractive|llm] [--per-book N]
    python benchmarks/pair_qa.py report --out OUT

Per pair: right where the book says (answered, and leniently right: token recall of a gold string
>= 0.5, or the gold inside the answer), refused where it does not, both. `benchmarks/book_qa.py`
prints these beside its natural-set tables, with the wording-only baseline.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from pagerag.train.pairs import Pair, read_pairs, side_text_path  # noqa: E402


DEV_SETS = {"DEV-A": ("qa/christmas_carol.qa.jsonl", "books/christmas_carol.txt"),
            "DEV-B": ("qa/cornwall.qa.jsonl", "graphrag-bench-novel/texts/Novel-44557.txt")}


def make_dev(pairs_dir: Path) -> None:
    """Insert pairs for the DEV sets' unanswerable questions (inserts written for reporting:
    benchmarks/pairs/DEV-*.insert.jsonl); never fitted on."""
    import os

    from pagerag.train.pairs import make_book

    data = Path(os.environ.get("PAGERAG_DATA_DIR") or REPO_ROOT.parent / "shared" / "data")
    for name, (qa, book) in DEV_SETS.items():
        pairs = make_book(name, pairs_dir / name, data, book_file=data / book, qa_path=data / qa,
                          inserts_path=REPO_ROOT / "benchmarks" / "pairs" / f"{name}.insert.jsonl", cut=False)
        print(f"{name}: {len(pairs)} insert pairs", flush=True)


def side_repo(repos: Path, book: str, side: str) -> Path:
    return repos / book / f"{side}.rag"


def build(pairs_dir: Path, repos: Path, books=None) -> None:
    """A repository per side that some pair asks (one `pagerag build` process at a time)."""
    needed = sorted({(p.book, side) for p in read_pairs(pairs_dir, books) for side in (p.says, p.silent)})
    for book, side in needed:
        repo = side_repo(repos, book, side)
        if (repo / "manifest.json").is_file():
            continue
        repo.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pagerag", "build", str(side_text_path(pairs_dir, book, side)),
                               "--repo", str(repo), "--quiet"], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"build of {book}/{side} failed: {done.stderr.strip().splitlines()[-1:]}")
        print(f"built {book}/{side} in {time.perf_counter() - started:.0f} s", flush=True)


def sample(pairs: list[Pair], per_book: int | None, seed: int = 0) -> list[Pair]:
    """`per_book` pairs of each book (its kinds in proportion), drawn with a fixed seed; all when None."""
    if not per_book:
        return pairs
    rng = random.Random(seed)
    out = []
    by_book = defaultdict(list)
    for p in pairs:
        by_book[p.book].append(p)
    for book in sorted(by_book):
        pool = sorted(by_book[book], key=lambda p: p.id)
        rng.shuffle(pool)
        out += pool[:per_book]
    return out


class Rows:
    """results.jsonl: one row per (system, pair, side), appended as measured; a re-run resumes."""

    def __init__(self, out: Path):
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "pair_results.jsonl"
        self.rows = [json.loads(x) for x in self.path.read_text().splitlines() if x.strip()] if self.path.is_file() else []
        self.done = {(r["system"], r["pair"], r["side"]) for r in self.rows}

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.done.add((row["system"], row["pair"], row["side"]))
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def side_row(system: str, pair: Pair, side: str, answer, started: float) -> dict:
    from pagerag.evaluate.scoring import lenient_by_recall, strict_match

    says = side == pair.says
    answered = answer.decision == "answered"
    return {"system": system, "pair": pair.id, "book": pair.book, "kind": pair.kind, "side": side, "says": says,
            "decision": answer.decision, "label": answer.label, "reason": answer.reason, "answer": answer.answer[:400],
            "strict": bool(says and answered and strict_match(answer.answer, pair.answers)),
            "lenient": bool(says and answered and lenient_by_recall(answer.answer, pair.answers)),
            "p": answer.verdict.score if answer.verdict else None, "rcs": answer.rcs,
            "judged": [j.get("p_yes", j.get("p_some")) for j in answer.judged],
            "latency_ms": answer.latency_ms, "tokens": answer.prompt_tokens,
            "wall_ms": round((time.perf_counter() - started) * 1000, 1)}


def run(pairs: list[Pair], repos: Path, rows: Rows, system: str = "extractive", llm=None, pipeline: str = "full",
        **settings) -> None:
    """Ask every pair's question of both its sides, one repository open at a time."""
    from pagerag.api import PageRAG

    todo = [(p, side) for p in pairs for side in (p.says, p.silent) if (system, p.id, side) not in rows.done]
    todo.sort(key=lambda ps: (ps[0].book, ps[1]))
    rag, opened = None, None
    for i, (pair, side) in enumerate(todo, 1):
        if opened != (pair.book, side):
            rag, opened = PageRAG(side_repo(repos, pair.book, side), pipeline=pipeline, llm=llm or "extractive",
                                  **settings), (pair.book, side)
        started = time.perf_counter()
        rows.add(side_row(system, pair, side, rag.ask(pair.question), started))
        if i % 25 == 0:
            print(f"{system} pairs {i}/{len(todo)}", file=sys.stderr, flush=True)


def pair_summary(rows: list[dict]) -> dict:
    """Right where the book says, refused where it does not, both; by pair (complete pairs only)."""
    sides = defaultdict(dict)
    for r in rows:
        sides[r["pair"]][r["says"]] = r
    complete = [s for s in sides.values() if True in s and False in s]
    if not complete:
        return {"pairs": 0}
    right = [s[True]["lenient"] for s in complete]
    refused = [s[False]["decision"] == "refused" for s in complete]
    answered_silent = [s[False]["decision"] == "answered" for s in complete]
    lat = [r["wall_ms"] for s in complete for r in s.values()]
    return {"pairs": len(complete), "right_where_says": sum(right) / len(complete),
            "strict_where_says": sum(s[True]["strict"] for s in complete) / len(complete),
            "answered_where_says": sum(s[True]["decision"] == "answered" for s in complete) / len(complete),
            "refused_where_not": sum(refused) / len(complete),
            "both": sum(a and b for a, b in zip(right, refused)) / len(complete),
            "chance_both": (sum(right) / len(complete)) * (sum(refused) / len(complete)),
            "answered_both_sides": sum(s[True]["decision"] == "answered" and a for s, a in zip(complete, answered_silent)) / len(complete),
            "median_wall_ms": statistics.median(lat)}


def summaries(rows: list[dict]) -> dict:
    """pair_summary per (system, group): every pair, by kind, by book."""
    groups = defaultdict(list)
    for r in rows:
        groups[(r["system"], "all")].append(r)
        groups[(r["system"], r["kind"])].append(r)
    return {f"{system} / {group}": pair_summary(v) for (system, group), v in sorted(groups.items())}


def wording_on_pairs(pairs: list[Pair]) -> dict:
    """The wording-only baseline on pairs: TF-IDF + logistic regression on the 750 written
    training questions (answerable or not; benchmarks/reader_sketch.py's model), its threshold
    refusing 85% of the held-out unanswerable ones. It reads the question, never the book, so it
    decides both sides of a pair alike: both right is 0 by construction; what it answers, it
    answers on both sides."""
    import os

    import numpy as np
    from reader_sketch import auc, questions  # benchmarks/ is on sys.path
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import LeaveOneGroupOut, cross_val_predict
    from sklearn.pipeline import make_pipeline

    from pagerag.train.books import TRAIN_BOOKS

    data = Path(os.environ.get("PAGERAG_DATA_DIR") or REPO_ROOT.parent / "shared" / "data")
    rows = [r for b in TRAIN_BOOKS for r in questions(data, f"qa/train/{b}.qa.jsonl")]
    q, y = [r["question"] for r in rows], np.array([int(r["answerable"]) for r in rows])
    model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
                          LogisticRegression(C=3.0, max_iter=2000))
    held = cross_val_predict(model, q, y, groups=[r["book"] for r in rows], cv=LeaveOneGroupOut(),
                             method="predict_proba")[:, 1]
    cut = float(np.quantile(held[y == 0], 0.85))
    model.fit(q, y)
    p = model.predict_proba([x.question for x in pairs])[:, 1] if pairs else np.array([])
    return {"natural_lobo_auc": auc(y, held), "pairs": len(pairs),
            "answered_both_sides": float(np.mean(p > cut)) if pairs else float("nan"),
            "refused_both_sides": float(np.mean(p <= cut)) if pairs else float("nan"), "both": 0.0}


def pct(x) -> str:
    return "n/a" if x is None or x != x else f"{100 * x:.1f}"


def print_pairs(table: dict, title: str = "pairs") -> None:
    print(f"\n{title}: | system / pairs | n | right where the book says | refused where it does not | both right "
          "| chance (product) | answered both sides | median wall ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key, s in table.items():
        if s.get("pairs"):
            print(f"| {key} | {s['pairs']} | {pct(s['right_where_says'])} | {pct(s['refused_where_not'])} | "
                  f"**{pct(s['both'])}** | {pct(s['chance_both'])} | {pct(s['answered_both_sides'])} | {s['median_wall_ms']:.0f} |")


def print_outcomes(rows: list[dict]) -> None:
    """What each side ended as, per system: answered (right or not by the lenient check) or
    refused, by reason."""
    from collections import Counter

    print("\noutcomes: | system | side | answered, right | answered, not right | refused: reason (n) |")
    print("| --- | --- | ---: | ---: | --- |")
    for system in sorted({r["system"] for r in rows}):
        for says, side in ((True, "says"), (False, "silent")):
            mine = [r for r in rows if r["system"] == system and r["says"] == says]
            answered = [r for r in mine if r["decision"] == "answered"]
            refused = Counter(r["reason"] for r in mine if r["decision"] == "refused")
            right = sum(r["lenient"] for r in answered)
            print(f"| {system} | {side} ({len(mine)}) | {right} | {len(answered) - right} | "
                  f"{', '.join(f'{k} ({n})' for k, n in sorted(refused.items())) or '-'} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("make-dev", "build", "run", "report"))
    ap.add_argument("--pairs", type=Path)
    ap.add_argument("--repos", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--books", default=None, help="comma-separated book ids (default: every book under --pairs)")
    ap.add_argument("--system", default="extractive", help="extractive, or llm (llm.gguf / PAGERAG_LLM__GGUF)")
    ap.add_argument("--pipeline", default="full")
    ap.add_argument("--per-book", type=int, default=None, help="pairs per book, drawn with a fixed seed")
    ap.add_argument("--kind", default=None, help="insert or cut (default: both)")
    ap.add_argument("--wording", action="store_true", help="also the wording-only baseline on these pairs")
    args = ap.parse_args()
    books = set(args.books.split(",")) if args.books else None
    if args.command == "make-dev":
        make_dev(args.pairs)
        return 0
    if args.command == "build":
        build(args.pairs, args.repos, books)
        return 0
    rows = Rows(args.out)
    if args.command == "run":
        pairs = [p for p in read_pairs(args.pairs, books) if args.kind in (None, p.kind)]
        llm = None
        name = args.system if args.pipeline == "full" else f"{args.system}:{args.pipeline}"
        if args.system == "llm":
            from pagerag.settings import load_settings

            llm = {"backend": "llamacpp", "gguf": load_settings().llm.gguf}
        run(sample(pairs, args.per_book), args.repos, rows, name, llm, args.pipeline)
    print_pairs(summaries(rows.rows))
    print_outcomes(rows.rows)
    if args.wording and args.pairs:
        w = wording_on_pairs([p for p in read_pairs(args.pairs, books) if args.kind in (None, p.kind)])
        print(f"\nwording only (the question's text, no book): AUC {w['natural_lobo_auc']:.3f} on the written training "
              f"sets held out by book; on {w['pairs']} pairs it answers both sides of {pct(w['answered_both_sides'])}% "
              f"and refuses both of {pct(w['refused_both_sides'])}%: both right **0.0** (by construction)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
