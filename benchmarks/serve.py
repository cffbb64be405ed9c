"""Serving benchmark: `pagerag serve` under load on Moby Dick (extractive backend, no LLM).

    python benchmarks/serve.py                          # builds WORK/moby.rag once, then measures
    python benchmarks/serve.py --work /tmp/pagerag-serve-bench --concurrency 1 4 8 --json out.json

The server runs in its own process; the load comes from this one (threads, one HTTP client each).
200 questions are made deterministically from the repository's own graph: "Who is X?", "What does
the book say about X?", "What happens to X?" for its most-mentioned named entities, and one in
four asks for something the book cannot hold ("What was X's telephone number?") and must be
refused. Measured, per concurrency: throughput (responses/s), p50/p95 latency, errors, answered
vs refused (and how many of the must-refuse questions were refused). Then the same questions at
concurrency 4 while the repository is rebuilt through POST /v1/builds and swapped in: errors must
be 0, every response must come from exactly one version (its X-PageRAG-Version header, and every
citation must be a span of that version's text), and every question started after the swap must
see the new version. For the serving layer's own cost, the same questions are asked in-process
(`PageRAG.ask`, one at a time) and compared with the server at concurrency 1.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests" / "serve"))

BOOK = "books/melville-moby_dick.txt"
BAIT = ["What was {}'s telephone number?", "Which social media site did {} use most?"]
ASK_TEMPLATES = ["Who is {}?", "What does the book say about {}?", "What happens to {}?"]


def make_questions(repo: Path, n: int) -> tuple[list[str], set[str]]:
    """n questions from the governed graph's named entities, most-mentioned first; a quarter of
    them must be refused. Deterministic for a given repository."""
    from pagerag.repository import Repository

    entities = [e for e in Repository.open(repo).graph("governed").entities
                if e.type != "NOUN_PHRASE" and e.name[:1].isupper() and len(e.passage_ids) >= 3]
    entities.sort(key=lambda e: (-len(e.passage_ids), e.name))
    questions, bait = [], set()
    for i in range(n):
        name = entities[i % len(entities)].name
        if i % 4 == 3:
            q = BAIT[(i // 4) % len(BAIT)].format(name)
            bait.add(q)
        else:
            q = ASK_TEMPLATES[i % 4].format(name)
        questions.append(q)
    return questions, bait


# ---- load -----------------------------------------------------------------------------------

def run_load(url: str, questions: list[str], concurrency: int, until=None) -> dict:
    """Ask `questions` with `concurrency` clients; with `until(rows so far)`, keep cycling the
    questions until it returns True (and all of them were asked at least once)."""
    import httpx

    rows: list[dict] = []
    lock = threading.Lock()
    counter = iter(range(10**9))

    def next_index():
        with lock:
            i = next(counter)
            if i >= len(questions) and (until is None or until(rows)):
                return None
        return i

    def client():
        with httpx.Client(timeout=300) as http:
            while (i := next_index()) is not None:
                q = questions[i % len(questions)]
                started = time.monotonic()
                try:
                    r = http.post(url + "/v1/ask", json={"question": q})
                    body = r.json()
                    row = {"status": r.status_code, "version": r.headers.get("x-pagerag-version", ""), "body": body}
                except Exception as exc:  # a dropped connection counts as an error, not a crash
                    row = {"status": 0, "version": "", "body": {"error": str(exc)}}
                row.update(question=q, started=started, ended=time.monotonic())
                with lock:
                    rows.append(row)

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"rows": rows, "wall": time.monotonic() - t0, "concurrency": concurrency}


def summarise(run: dict, bait: set[str]) -> dict:
    rows = run["rows"]
    ok = [r for r in rows if r["status"] == 200]
    latencies = sorted((r["ended"] - r["started"]) * 1000 for r in rows)
    decisions = [r["body"].get("decision") for r in ok]
    bait_rows = [r for r in ok if r["question"] in bait]
    stages: dict[str, list[float]] = {}
    for r in ok:
        for stage, ms in r["body"].get("latency_ms", {}).items():
            stages.setdefault(stage, []).append(ms)
    return {
        "concurrency": run["concurrency"], "questions": len(rows), "errors": len(rows) - len(ok),
        "throughput": round(len(rows) / run["wall"], 2), "wall_s": round(run["wall"], 1),
        "p50_ms": round(_pct(latencies, 50)), "p95_ms": round(_pct(latencies, 95)),
        "answered": decisions.count("answered"), "refused": decisions.count("refused"),
        "bait_refused": f"{sum(r['body'].get('decision') == 'refused' for r in bait_rows)}/{len(bait_rows)}",
        "stage_p50_ms": {s: round(statistics.median(v), 1) for s, v in stages.items()},
    }


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# ---- rebuild while serving --------------------------------------------------------------------

def rebuild_under_load(url: str, repo: Path, root: Path, questions: list[str], bait: set[str]) -> dict:
    import httpx

    old_version = httpx.get(url + "/v1/health").json()["repos"]["moby"]
    old_text = _stored_text(repo)
    job = httpx.post(url + "/v1/builds", json={"path": "melville-moby_dick.txt", "repo": "moby"}).json()
    events: list[dict] = []

    def follow():
        with httpx.stream("GET", f"{url}/v1/builds/{job['id']}/events", timeout=None) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append({**json.loads(line[6:]), "at": time.monotonic()})

    follower = threading.Thread(target=follow)
    follower.start()

    def swapped_and_seen(rows) -> bool:  # the job has ended and 20 questions started after it
        if follower.is_alive() or not events:
            return False
        return sum(r["started"] > events[-1]["at"] for r in rows) >= 20

    run = run_load(url, questions, 4, until=swapped_and_seen)
    follower.join()
    final = events[-1] if events else {}
    new_version = final.get("version")
    new_text = _stored_text(repo)
    texts = {f"moby@{old_version}": old_text, f"moby@{new_version}": new_text}
    mixed = 0
    for r in run["rows"]:
        text = texts.get(r["version"])
        if r["status"] == 200 and (text is None or any(text[c["start"]:c["end"]] != c["quote"]
                                                       for c in r["body"].get("citations", []))):
            mixed += 1
    after = [r for r in run["rows"] if events and r["started"] > events[-1]["at"]]
    summary = summarise(run, bait)
    summary.update({
        "build_status": final.get("status"), "build_error": final.get("error"),
        "build_s": round(final.get("at", 0) - events[0]["at"], 1) if events else None,
        "versions": {v: sum(r["version"] == v for r in run["rows"]) for v in sorted({r["version"] for r in run["rows"]})},
        "inconsistent": mixed, "after_swap": len(after),
        "after_swap_on_new": sum(r["version"] == f"moby@{new_version}" for r in after),
        "resumed": final.get("resumed"),
    })
    return summary


def _stored_text(repo: Path) -> str:
    (source,) = (repo / "sources").glob("*.txt")
    return source.read_text(encoding="utf-8")


# ---- in-process baseline -----------------------------------------------------------------------

def in_process(repo: Path, questions: list[str], out: Path) -> None:
    """`PageRAG.ask` on the served (pinned) copy, one question at a time (child process): one
    pass to warm it as the server was warmed, then the measured pass."""
    from threadpoolctl import threadpool_limits

    from pagerag.api import PageRAG

    threadpool_limits(limits=1, user_api="blas")  # as the server does
    rag = PageRAG(repo, llm="extractive")
    for q in questions:
        rag.ask(q)
    latencies, stages = [], {}
    for q in questions:
        t0 = time.perf_counter()
        answer = rag.ask(q)
        latencies.append((time.perf_counter() - t0) * 1000)
        for stage, ms in answer.latency_ms.items():
            stages.setdefault(stage, []).append(ms)
    wall = sum(latencies) / 1000
    latencies.sort()
    out.write_text(json.dumps({"p50_ms": round(_pct(latencies, 50)), "p95_ms": round(_pct(latencies, 95)),
                               "throughput": round(len(latencies) / wall, 2),
                               "stage_p50_ms": {k: round(statistics.median(v), 1) for k, v in stages.items()}}))


# ---- main -------------------------------------------------------------------------------------

def prepare(work: Path, data: Path) -> tuple[Path, Path]:
    """WORK/moby.rag built once; a hard-linked copy served (the rebuild replaces the copy only);
    the build root holds the rebuild's source: the book with a preface, so every offset moves."""
    base = work / "moby.rag"
    if not (base / "manifest.json").is_file():
        print(f"building {base} (once) …", flush=True)
        subprocess.run([sys.executable, "-m", "pagerag", "build", str(data / BOOK), "--repo", str(base), "--quiet"],
                       check=True)
    served = work / "served" / "moby.rag"
    shutil.rmtree(served.parent, ignore_errors=True)  # and its build cache: the rebuild starts cold
    served.parent.mkdir(parents=True)
    shutil.copytree(base, served, copy_function=os.link)
    root = work / "root"
    root.mkdir(exist_ok=True)
    text = (data / BOOK).read_text(encoding="utf-8")
    (root / "melville-moby_dick.txt").write_text("A NOTE ON THIS EDITION: rebuilt while serving.\n\n" + text,
                                                 encoding="utf-8")
    return served, root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/pagerag-serve-bench"))
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--workers", type=int, default=1, help="the server's --workers")
    parser.add_argument("--no-rebuild", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--_in-process", dest="in_process", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_process:
        repo, out = map(Path, args.in_process)
        questions = json.loads((out.with_suffix(".questions.json")).read_text())
        return in_process(repo, questions, out)

    from serving import ServerProcess

    data = Path(os.environ.get("PAGERAG_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
    args.work.mkdir(parents=True, exist_ok=True)
    served, root = prepare(args.work, data)
    questions, bait = make_questions(served, args.questions)
    results = {"load_before": os.getloadavg(), "questions": len(questions), "must_refuse": len(bait), "runs": []}
    server_args = ["--repo", f"moby={served}", "--llm", "extractive", "--build-root", str(root),
                   "--workers", str(args.workers)]
    cache = args.work / "cache-run"  # a cold cache: the first pass pays what a new server pays
    shutil.rmtree(cache, ignore_errors=True)
    env = {"PAGERAG_CACHE_DIR": str(cache)}
    with ServerProcess(server_args, env=env) as server:
        print(f"server up at {server.url}; warming the window cache with one pass at concurrency 4 …", flush=True)
        results["first_pass"] = summarise(run_load(server.url, questions, 4), bait)
        for c in args.concurrency:
            summary = summarise(run_load(server.url, questions, c), bait)
            print(json.dumps(summary), flush=True)
            results["runs"].append(summary)
        pinned = _pinned(served)
        out = args.work / "in_process.json"
        out.with_suffix(".questions.json").write_text(json.dumps(questions))
        subprocess.run([sys.executable, __file__, "--_in-process", str(pinned), str(out)], check=True,
                       env={**os.environ, **env})
        results["in_process"] = json.loads(out.read_text())
        print("in-process:", results["in_process"], flush=True)
        if not args.no_rebuild:
            results["rebuild"] = rebuild_under_load(server.url, served, root, questions, bait)
            print("rebuild:", json.dumps(results["rebuild"]), flush=True)
    results["load_after"] = os.getloadavg()
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def _pinned(served: Path) -> Path:
    pins = sorted((served.parent / f".{served.name}.serve").glob("[0-9a-f]" * 12))
    return pins[-1]


def report(results: dict) -> str:
    lines = [f"load average before {results['load_before'][0]:.1f}, after {results['load_after'][0]:.1f} "
             f"(2 cores); {results['questions']} questions, {results['must_refuse']} of them must be refused", "",
             "| run | concurrency | responses/s | p50 ms | p95 ms | errors | answered / refused | must-refuse refused |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    rows = [("first pass (cold window cache)", results["first_pass"])] + [("server", r) for r in results["runs"]]
    if "rebuild" in results:
        rows.append(("server, rebuild + swap running", results["rebuild"]))
    for name, r in rows:
        lines.append(f"| {name} | {r['concurrency']} | {r['throughput']:.2f} | {r['p50_ms']:,} | {r['p95_ms']:,} | "
                     f"{r['errors']} | {r['answered']} / {r['refused']} | {r['bait_refused']} |")
    ip = results.get("in_process")
    if ip:
        lines.append(f"| in-process `PageRAG.ask` | 1 | {ip['throughput']:.2f} | {ip['p50_ms']:,} | {ip['p95_ms']:,} | | | |")
    c1 = next((r for r in results["runs"] if r["concurrency"] == 1), None)
    if c1:
        lines += ["", "median ms per stage, server at concurrency 1: "
                  + ", ".join(f"{k} {v}" for k, v in c1["stage_p50_ms"].items())]
    if c1 and ip:
        lines += ["median ms per stage, in-process: " + ", ".join(f"{k} {v}" for k, v in ip["stage_p50_ms"].items()),
                  f"serving overhead at concurrency 1 (p50, HTTP + JSON + thread hand-off): "
                  f"{c1['p50_ms'] - ip['p50_ms']:+,} ms"]
    if "rebuild" in results:
        rb = results["rebuild"]
        lines += ["", f"rebuild: {rb['build_status']} in {rb['build_s']} s (resumed: {rb['resumed']}); responses per "
                      f"version {rb['versions']}; {rb['inconsistent']} inconsistent with their version; "
                      f"{rb['after_swap_on_new']}/{rb['after_swap']} questions started after the swap saw the new version"]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
