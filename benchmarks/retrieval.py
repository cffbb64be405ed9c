"""Retrieval benchmark: evidence recall at the budget per question type, and query latency.

    python benchmarks/retrieval.py                       # everything (builds repositories once)
    python benchmarks/retrieval.py --skip-latency        # recall only
    python benchmarks/retrieval.py --work /tmp/pagerag-bench --budget 2000 --json out.json

Recall, for four retrievers at the same token budget B (tiktoken):
  full           the PAGE-RAG route (pipelines/full.toml)
  passages-only  BM25 + dense + rerank, no graph (pipelines/passages-only.toml)
  dense-only     dense cosine ranking, passages packed by rank until B
  bm25-only      BM25 ranking, packed the same way
Question sets (answerable questions only), from $PAGERAG_DATA_DIR:
  qa/*.qa.jsonl  verbatim gold quotes: a quote is recalled when, after collapsing runs of
                 whitespace, it is a substring of one returned evidence span
  GraphRAG-Bench novel questions for the same books (Novel-44557 = the Cornwall book): gold
                 evidence is paraphrased, so a statement counts as recalled when at least 60%
                 of its content words (lower case, stop words removed, a crude suffix strip)
                 occur in one returned span (pagerag.evaluate.scoring.statement_located, the
                 rule the training corpus uses too). The rule is the same for every retriever,
                 so the comparison is fair even if the absolute level is rough.
Latency, on a Moby Dick repository: p50/p95 of analysis + plan + operators + rerank (the
`total` timing, model and repository already loaded; with and without the precomputed
sentence-window index), and the cold wall time of one `pagerag retrieve` process.
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

BOOKS = {  # name -> (source text under the data dir, qa file, GraphRAG-Bench source id)
    "carol": ("books/christmas_carol.txt", "qa/christmas_carol.qa.jsonl", None),
    "cornwall": ("graphrag-bench-novel/texts/Novel-44557.txt", "qa/cornwall.qa.jsonl", "Novel-44557"),
}
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
PIPELINES = ("full", "passages-only", "dense-only", "bm25-only")


def collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def quote_recalled(quote: str, spans: list[str]) -> bool:
    q = collapse(quote)
    return any(q in collapse(s) for s in spans)


def statement_recalled(statement: str, spans: list[str]) -> bool:
    """The paraphrased-evidence rule of pagerag.evaluate.scoring (>= EVIDENCE_LOCATED content words)."""
    from pagerag.evaluate.scoring import statement_located

    return statement_located(statement, spans)


# --------------------------------------------------------------------------------------------
# Repositories and questions


def ensure_repo(data_dir: Path, rel: str, work: Path, name: str) -> Path:
    from pagerag.build import build_repository
    from pagerag.repository import Repository
    from pagerag.settings import load_settings

    repo = work / f"{name}.rag"
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


def load_questions(data_dir: Path, book: str) -> list[dict]:
    _, qa_file, bench_id = BOOKS[book]
    out = []
    for line in (data_dir / qa_file).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("answerable"):
            out.append({"set": "qa", "type": row["type"], "question": row["question"], "gold": row["evidence"],
                        "match": "exact"})
    if bench_id:
        for row in json.loads((data_dir / "graphrag-bench-novel" / "questions.json").read_text(encoding="utf-8")):
            if row.get("source") == bench_id and row.get("evidence"):
                out.append({"set": "graphrag-bench", "type": row["question_type"], "question": row["question"],
                            "gold": row["evidence"], "match": "fuzzy"})
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

    if name in ("full", "passages-only"):
        r = retrieve(question, repo, settings_of[name], budget=budget, encode=encode)
        return [e.text for e in r.evidence], {"need": r.analysis.need, "ms": r.timings_ms["total"],
                                              "graph_only": sum(1 for e in r.evidence if "text" not in e.operators)}
    state = get_state(repo)
    t0 = time.perf_counter()
    if name == "dense-only":
        qvec = encode([question])[0]
        rows = (-(state.vectors @ qvec)).argsort()[:200]
    else:
        rows, _ = state.bm25.search(question, 200)
    return packed_baseline(state, rows, budget), {"ms": (time.perf_counter() - t0) * 1000}


def warm_windows(repo: Path, settings, encode) -> float:
    """Embed every sentence window once (cached on disk), as a long-running service would have."""
    from pagerag.retrieve.windows import build_window_index
    from pagerag.retrieve.state import get_state

    t0 = time.perf_counter()
    build_window_index(get_state(repo), settings.embed.model, encode)
    return time.perf_counter() - t0


def recall_table(data_dir: Path, work: Path, budget: int, books: list[str], sets: list[str]) -> dict:
    from pagerag.retrieve.api import get_encoder
    from pagerag.settings import load_settings

    settings_of = {p: load_settings(pipeline=p, environ={}) for p in ("full", "passages-only")}
    encode = get_encoder(settings_of["full"])
    rows = []
    for book in books:
        repo = ensure_repo(data_dir, BOOKS[book][0], work, book)
        warm_windows(repo, settings_of["full"], encode)
        questions = [q for q in load_questions(data_dir, book) if q["set"] in sets]
        print(f"{book}: {len(questions)} questions", file=sys.stderr, flush=True)
        for q in questions:
            for name in PIPELINES:
                spans, info = run_question(name, q["question"], repo, settings_of, budget, encode)
                hit = quote_recalled if q["match"] == "exact" else statement_recalled
                got = [hit(g, spans) for g in q["gold"]]
                rows.append({"book": book, "set": q["set"], "type": q["type"], "pipeline": name, "question": q["question"],
                             "recall": sum(got) / len(got), "all": all(got), **info})
    return {"rows": rows}


def print_recall(rows: list[dict]) -> None:
    groups: dict[tuple[str, str], dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[(r["set"], r["type"])][r["pipeline"]].append(r)
        groups[(r["set"], "ALL")][r["pipeline"]].append(r)
    print(f"\nEvidence recall at the budget (mean fraction of gold evidence recalled; in brackets: "
          f"questions with all of it)")
    print(f"| set | type | n | " + " | ".join(PIPELINES) + " |")
    print("| --- | --- | ---: | " + " | ".join("---:" for _ in PIPELINES) + " |")
    for (qset, qtype), by_pipe in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] == "ALL", kv[0][1])):
        n = len(by_pipe[PIPELINES[0]])
        cells = []
        for name in PIPELINES:
            rs = by_pipe[name]
            cells.append(f"{statistics.mean(r['recall'] for r in rs):.2f} ({sum(r['all'] for r in rs)})")
        print(f"| {qset} | {qtype} | {n} | " + " | ".join(cells) + " |")
    full = [r for r in rows if r["pipeline"] == "full"]
    if full:
        print(f"\nfull: evidence spans found only by graph operators: "
              f"{sum(r.get('graph_only', 0) for r in full)} over {len(full)} questions")
        agree = defaultdict(lambda: defaultdict(int))
        for r in full:
            if r["set"] == "qa":
                agree[r["type"]][r["need"]] += 1
        print("need routing on the qa set (gold type -> routed need):",
              {t: dict(v) for t, v in agree.items()})


# --------------------------------------------------------------------------------------------
# Latency


def latency(data_dir: Path, work: Path, budget: int) -> dict:
    from pagerag.retrieve.api import get_encoder, retrieve
    from pagerag.retrieve.windows import build_window_index, window_index
    from pagerag.retrieve.state import get_state
    from pagerag.settings import load_settings

    repo = ensure_repo(data_dir, LATENCY_BOOK, work, "moby")
    settings = load_settings(environ={})
    encode = get_encoder(settings)
    state = get_state(repo)
    out = {"passages": len(state.passages)}
    for q in ("Who is Ahab?", "What are the main themes of the book?"):  # views, prototypes, community vectors
        retrieve(q, repo, settings, encode=encode)
    index = window_index(state, settings.embed.model)
    index.spans.clear()  # measure the on-demand path first, as if no window index had been built
    index.vectors.clear()
    index.persist = False  # (and leave a complete index on disk alone)
    for label in ("on-demand windows", "window index"):
        if label == "window index":
            index.persist = True
            index.reload()
            t0 = time.perf_counter()
            build_window_index(state, settings.embed.model, encode)  # nothing to do if already on disk
            out["window_index_build_s"] = round(time.perf_counter() - t0, 1)
        totals = []
        for q in MOBY_QUESTIONS:
            r = retrieve(q, repo, settings, budget=budget, encode=encode)
            totals.append(r.timings_ms["total"])
        totals.sort()
        out[label] = {"p50_ms": round(statistics.median(totals), 1),
                      "p95_ms": round(totals[min(len(totals) - 1, int(0.95 * len(totals)))], 1)}
        print(f"  {label}: {out[label]}", file=sys.stderr, flush=True)
    # Cold: a new process each time; the first one after a build also writes the query snapshot.
    out["cold_s"] = [cold_wall_time(repo, q) for q in MOBY_QUESTIONS[:3]]
    return out


def cold_wall_time(repo: Path, question: str = "Who is the captain of the Pequod?") -> float | str:
    """One new `pagerag retrieve` process: import, load the repository, answer one question."""
    cmd = [sys.executable, "-m", "pagerag", "retrieve", question, "--repo", str(repo), "--json"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT)
    if done.returncode != 0:
        return f"failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:] }"
    return round(time.perf_counter() - t0, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("PAGERAG_DATA_DIR", str(REPO_ROOT.parent / "shared" / "data")))
    ap.add_argument("--work", default=str(Path.home() / ".cache" / "pagerag" / "bench"), help="Where repositories are built.")
    ap.add_argument("--budget", type=int, default=2000)
    ap.add_argument("--books", default="carol,cornwall")
    ap.add_argument("--sets", default="qa,graphrag-bench", help="Question sets to score.")
    ap.add_argument("--skip-recall", action="store_true")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--json", dest="json_out", default="", help="Also write all rows and figures to this file.")
    args = ap.parse_args()
    data_dir, work = Path(args.data), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {"budget": args.budget}
    if not args.skip_recall:
        result["recall"] = recall_table(data_dir, work, args.budget, args.books.split(","), args.sets.split(","))
        print_recall(result["recall"]["rows"])
    if not args.skip_latency:
        result["latency"] = latency(data_dir, work, args.budget)
        lat = result["latency"]
        print(f"\nLatency on Moby Dick ({lat['passages']} passages), analysis+plan+operators+rerank, warm:")
        for label in ("on-demand windows", "window index"):
            print(f"  {label}: p50 {lat[label]['p50_ms']} ms, p95 {lat[label]['p95_ms']} ms")
        print(f"  window index built once in {lat['window_index_build_s']} s; cold `pagerag retrieve` "
              f"(three new processes, seconds): {lat['cold_s']}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
