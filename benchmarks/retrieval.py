"""Retrieval benchmark: evidence recall at the budget per question type, and query latency.

    python benchmarks/retrieval.py --repos /work/repos               # everything
    python benchmarks/retrieval.py --repos /work/repos --skip-latency --json out.json
    python benchmarks/retrieval.py --repos /work/repos --sets dev    # the two DEV sets only

Recall, for five retrievers at the same token budget B (tiktoken):
  full           the PAGE-RAG route (pipelines/full.toml): every operator, one ranked pool
  passages-only  BM25 + dense + rerank, no graph (pipelines/passages-only.toml), same kind of ranker
  ppr            personalised PageRank alone, passages by stationary mass (pipelines/ppr.toml)
  dense-only     dense cosine ranking, passages packed by rank until B
  bm25-only      BM25 ranking, packed the same way
Question sets (answerable questions only), from $PAGERAG_DATA_DIR — all of them test sets: no
model or rule was fitted on them.
  test books     the GraphRAG-Bench questions of the five test novels (Novel-10762, -44557,
                 -47676, -54537, -5956), repositories <repos>/<Novel-id>.rag built with default
                 settings. Their evidence is paraphrased: a statement counts as recalled when at
                 least 60% of its content words occur in one returned span
                 (pagerag.evaluate.scoring.statement_located, the rule the training corpus uses).
  DEV-A, DEV-B   qa/christmas_carol.qa.jsonl and qa/cornwall.qa.jsonl: verbatim quotes, recalled
                 when a quote (whitespace collapsed) lies inside one returned span. DEV-B's book
                 is Novel-44557; DEV-A's repository is built under --work when missing.
Latency, on a Moby Dick repository (built under --work when missing): p50/p95 of analysis +
plan + operators + rerank + ranker + evidence (the `total` timing; model, repository and
sentence-window index loaded), and the wall time of new `pagerag retrieve` processes.
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
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

TEST_BOOKS = ("Novel-10762", "Novel-44557", "Novel-47676", "Novel-54537", "Novel-5956")
DEV = {"DEV-A": ("books/christmas_carol.txt", "qa/christmas_carol.qa.jsonl", "carol"),
       "DEV-B": ("graphrag-bench-novel/texts/Novel-44557.txt", "qa/cornwall.qa.jsonl", "Novel-44557")}
LATENCY_BOOK = "books/melville-moby_dick.txt"
MOBY_QUESTIONS = [
    "Who is the captain of the Pequod?", "What is the name of the white whale?", "Who narrates the story?",
    "How did Ahab lose his leg?", "What is Queequeg's relationship to Ishmael?", "Who is Starbuck?",
    "What does the doubloon nailed to the mast represent?", "How is Fedallah connected to Ahab?",
    "Where do Ishmael and Queequeg first meet?", "What happens to the Pequod at the end?",
    "What is the role of Stubb on the ship?", "How does Ishmael survive the sinking?",
    "What is the Spouter-Inn?", "What does Father Mapple preach about?", "Who is Pip and what happens to him?",
    "How does Ahab treat Starbuck?", "What is ambergris?", "What are the main themes of the novel?",
    "How does Ahab's obsession develop over the course of the book?", "Who is Tashtego?",
    "What is the Rachel looking for?", "What does Queequeg's coffin become?", "Who is Bildad?",
    "Which ships does the Pequod meet?", "What is the whiteness of the whale chapter about?",
    "How are Flask and Daggoo related?", "What does Ahab forge his harpoon with?",
    "What prophecy does Fedallah make about Ahab's death?", "Who owns the Pequod?",
    "What is the relationship between Ahab and Moby Dick?",
]
PIPELINES = ("full", "passages-only", "ppr", "dense-only", "bm25-only")


def collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def quote_recalled(quote: str, spans: list[str]) -> bool:
    q = collapse(quote)
    return any(q in collapse(s) for s in spans)


def statement_recalled(statement: str, spans: list[str]) -> bool:
    from pagerag.evaluate.scoring import statement_located

    return statement_located(statement, spans)


# --------------------------------------------------------------------------------------------
# Repositories and questions


def ensure_repo(data_dir: Path, rel: str, repo: Path) -> Path:
    from pagerag.build import build_repository
    from pagerag.repository import Repository
    from pagerag.settings import load_settings

    try:
        Repository.open(repo)
        return repo
    except Exception:
        pass
    t0 = time.perf_counter()
    print(f"building {repo} from {rel} …", file=sys.stderr, flush=True)
    build_repository([data_dir / rel], repo, load_settings(environ={}), show_progress=False)
    print(f"  built in {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    return repo


def bench_questions(data_dir: Path, book: str) -> list[dict]:
    rows = json.loads((data_dir / "graphrag-bench-novel" / "questions.json").read_text(encoding="utf-8"))
    return [{"set": "test books", "book": book, "type": r["question_type"], "question": r["question"],
             "gold": [e for e in r["evidence"] if e.strip()], "match": "fuzzy"}
            for r in rows if r.get("source") == book and any(e.strip() for e in r.get("evidence") or [])]


def dev_questions(data_dir: Path, name: str) -> list[dict]:
    out = []
    for line in (data_dir / DEV[name][1]).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("answerable"):
            out.append({"set": name, "book": DEV[name][2], "type": row["type"], "question": row["question"],
                        "gold": row["evidence"], "match": "exact"})
    return out


# --------------------------------------------------------------------------------------------
# Retrievers


def packed_baseline(state, rows, budget: int) -> list[str]:
    """Passages in rank order until the budget is spent (what a plain top-k retriever returns)."""
    spans, used = [], 0
    for row in rows:
        p = state.passages[int(row)]
        if used + p.n_tokens > budget:
            continue
        spans.append(p.text)
        used += p.n_tokens
    return spans


def run_question(name: str, question: str, repo: Path, settings_of: dict, budget: int, encode) -> tuple[list[str], dict]:
    from pagerag.retrieve.api import retrieve
    from pagerag.retrieve.state import get_state

    if name in settings_of:
        r = retrieve(question, repo, settings_of[name], budget=budget, encode=encode)
        graph_only = sum(1 for e in r.evidence if "text" not in e.operators)
        return [e.text for e in r.evidence], {"need": r.analysis.need, "ms": r.timings_ms["total"], "graph_only": graph_only}
    state = get_state(repo)
    t0 = time.perf_counter()
    if name == "dense-only":
        qvec = encode([question])[0]
        rows = (-(state.vectors @ qvec)).argsort()[:200]
    else:
        rows, _ = state.bm25.search(question, 200)
    return packed_baseline(state, rows, budget), {"ms": (time.perf_counter() - t0) * 1000}


def warm_windows(repo: Path, settings, encode) -> None:
    """Embed every sentence window once (cached on disk), as a long-running service would have."""
    from pagerag.retrieve.state import get_state
    from pagerag.retrieve.windows import build_window_index

    build_window_index(get_state(repo), settings.embed.model, encode)


def recall_rows(data_dir: Path, repos: Path, work: Path, budget: int, sets: list[str], log) -> list[dict]:
    from pagerag.retrieve.api import get_encoder
    from pagerag.settings import load_settings

    settings_of = {p: load_settings(pipeline=p, environ={}) for p in ("full", "passages-only", "ppr")}
    encode = get_encoder(settings_of["full"])
    jobs: list[tuple[Path, list[dict]]] = []
    if "test" in sets:
        jobs += [(repos / f"{b}.rag", bench_questions(data_dir, b)) for b in TEST_BOOKS]
    if "dev" in sets:
        carol = ensure_repo(data_dir, DEV["DEV-A"][0], work / "carol.rag")
        jobs += [(carol, dev_questions(data_dir, "DEV-A")), (repos / "Novel-44557.rag", dev_questions(data_dir, "DEV-B"))]
    rows = []
    for repo, questions in jobs:
        warm_windows(repo, settings_of["full"], encode)
        log(f"{repo.name}: {len(questions)} questions")
        for q in questions:
            for name in PIPELINES:
                spans, info = run_question(name, q["question"], repo, settings_of, budget, encode)
                hit = quote_recalled if q["match"] == "exact" else statement_recalled
                got = [hit(g, spans) for g in q["gold"]]
                rows.append({"set": q["set"], "book": q["book"], "type": q["type"], "pipeline": name,
                             "question": q["question"], "recall": sum(got) / len(got), "all": all(got), **info})
    return rows


def print_recall(rows: list[dict]) -> None:
    groups: dict[tuple[str, str], dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[(r["set"], r["type"])][r["pipeline"]].append(r)
        groups[(r["set"], "ALL")][r["pipeline"]].append(r)
    print("\nEvidence recall at the budget (mean fraction of gold evidence recalled; in brackets: "
          "questions with all of it); Δ = full − passages-only")
    print("| set | type | n | " + " | ".join(PIPELINES) + " | Δ |")
    print("| --- | --- | ---: | " + " | ".join("---:" for _ in PIPELINES) + " | ---: |")
    order = {"test books": 0, "DEV-A": 1, "DEV-B": 2}
    for (qset, qtype), by_pipe in sorted(groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1] == "ALL", kv[0][1])):
        n = len(by_pipe[PIPELINES[0]])
        means = {name: statistics.mean(r["recall"] for r in by_pipe[name]) for name in PIPELINES}
        cells = [f"{means[name]:.2f} ({sum(r['all'] for r in by_pipe[name])})" for name in PIPELINES]
        print(f"| {qset} | {qtype} | {n} | " + " | ".join(cells) + f" | {means['full'] - means['passages-only']:+.2f} |")
    full = [r for r in rows if r["pipeline"] == "full"]
    if full:
        print(f"\nfull: evidence spans only a graph operator proposed: {sum(r.get('graph_only', 0) for r in full)} "
              f"over {len(full)} questions")
        agree = defaultdict(lambda: defaultdict(int))
        for r in full:
            agree[(r["set"], r["type"])][r["need"]] += 1
        print("routing (set, gold type -> routed need):", {f"{k[0]}/{k[1]}": dict(v) for k, v in sorted(agree.items())})


def per_book(rows: list[dict]) -> None:
    """full − passages-only per test book (to see whether a gain holds on every book)."""
    by = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["set"] == "test books":
            by[r["book"]][r["pipeline"]].append(r["recall"])
    if by:
        print("\nper test book: full / passages-only / Δ")
        for book, d in sorted(by.items()):
            f, p = statistics.mean(d["full"]), statistics.mean(d["passages-only"])
            print(f"  {book}: {f:.3f} / {p:.3f} / {f - p:+.3f} (n={len(d['full'])})")


# --------------------------------------------------------------------------------------------
# Latency


def latency(data_dir: Path, work: Path, budget: int) -> dict:
    from pagerag.retrieve.api import get_encoder, retrieve
    from pagerag.retrieve.state import get_state
    from pagerag.settings import load_settings

    repo = ensure_repo(data_dir, LATENCY_BOOK, work / "moby.rag")
    settings = load_settings(environ={})
    encode = get_encoder(settings)
    state = get_state(repo)
    warm_windows(repo, settings, encode)
    out = {"passages": len(state.passages)}
    for q in ("Who is Ahab?", "What are the main themes of the book?"):  # views, PPR matrix, community vectors
        retrieve(q, repo, settings, encode=encode)
    totals, stages = [], defaultdict(list)
    for q in MOBY_QUESTIONS:
        r = retrieve(q, repo, settings, budget=budget, encode=encode)
        totals.append(r.timings_ms["total"])
        for k, v in r.timings_ms.items():
            stages[k].append(v)
    totals.sort()
    out["warm"] = {"p50_ms": round(statistics.median(totals), 1),
                   "p95_ms": round(totals[min(len(totals) - 1, int(0.95 * len(totals)))], 1)}
    out["stages_p50_ms"] = {k: round(statistics.median(v), 1) for k, v in stages.items() if k not in ("load", "model")}
    out["cold_s"] = [cold_wall_time(repo, q) for q in MOBY_QUESTIONS[:3]]
    return out


def cold_wall_time(repo: Path, question: str) -> float | str:
    """One new `pagerag retrieve` process: import, load the repository, answer one question."""
    cmd = [sys.executable, "-m", "pagerag", "retrieve", question, "--repo", str(repo), "--json"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT)
    if done.returncode != 0:
        return f"failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}"
    return round(time.perf_counter() - t0, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("PAGERAG_DATA_DIR", str(REPO_ROOT.parent / "shared" / "data")))
    ap.add_argument("--repos", required=True, help="Folder holding the test books' <Novel-id>.rag repositories.")
    ap.add_argument("--work", default=str(Path.home() / ".cache" / "pagerag" / "bench"),
                    help="Where the DEV-A and Moby Dick repositories are built when missing.")
    ap.add_argument("--budget", type=int, default=2000)
    ap.add_argument("--sets", default="test,dev", help="test (the five test books), dev (DEV-A, DEV-B), or both.")
    ap.add_argument("--skip-recall", action="store_true")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--json", dest="json_out", default="", help="Also write all rows and figures to this file.")
    args = ap.parse_args()
    from pagerag.retrieve.api import single_threaded_blas

    data_dir, work = Path(args.data), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    result: dict = {"budget": args.budget}
    with single_threaded_blas():
        if not args.skip_recall:
            result["recall"] = recall_rows(data_dir, Path(args.repos), work, args.budget, args.sets.split(","), log)
            print_recall(result["recall"])
            per_book(result["recall"])
        if not args.skip_latency:
            result["latency"] = lat = latency(data_dir, work, args.budget)
            print(f"\nLatency on Moby Dick ({lat['passages']} passages), warm, window index built: "
                  f"p50 {lat['warm']['p50_ms']} ms, p95 {lat['warm']['p95_ms']} ms")
            print(f"  per stage (p50 ms): {lat['stages_p50_ms']}")
            print(f"  cold `pagerag retrieve` (three new processes, seconds): {lat['cold_s']}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
