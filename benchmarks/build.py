"""Build benchmark: A Christmas Carol and Moby Dick from $PAGERAG_DATA_DIR/books, each in a fresh
process with an empty cache (nothing resumed). Prints words, seconds per stage, seconds per 100k
words, peak RSS and raw -> governed graph statistics.

    python benchmarks/build.py [--runs 3] [--books christmas_carol melville-moby_dick]

Targets on a 2-core machine: <= 45 s per 100k words end to end (nlp extractor), peak RSS <= 3 GB,
0 LLM tokens. With --runs > 1 the median run is reported.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    return Path(os.environ.get("PAGERAG_DATA_DIR") or REPO_ROOT.parent / "shared" / "data")


def build_once(book: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "bench.rag"
        env = dict(os.environ, PAGERAG_CACHE_DIR=str(Path(tmp) / "cache"))
        # /usr/bin/time is not everywhere; ask the child for its own peak RSS instead
        code = (
            "import resource, sys, runpy; sys.argv = ['pagerag', 'build', %r, '--repo', %r, '--quiet'];\n"
            "try:\n    runpy.run_module('pagerag', run_name='__main__')\n"
            "finally:\n    u = resource.getrusage(resource.RUSAGE_SELF)\n"
            "    c = resource.getrusage(resource.RUSAGE_CHILDREN)  # spaCy worker processes\n"
            "    print('PEAK_RSS_KB', max(u.ru_maxrss, c.ru_maxrss), file=sys.stderr)\n"
            "    print('CPU_S', u.ru_utime + u.ru_stime + c.ru_utime + c.ru_stime, file=sys.stderr)\n"
        ) % (str(book), str(repo))
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp)
        wall = time.perf_counter() - started
        if result.returncode != 0:
            raise SystemExit(f"build of {book.name} failed: {result.stderr.strip().splitlines()[-1:]}")
        peak_kb = int(next(l.split()[1] for l in result.stderr.splitlines() if l.startswith("PEAK_RSS_KB")))
        cpu = float(next(l.split()[1] for l in result.stderr.splitlines() if l.startswith("CPU_S")))
        manifest = json.loads((repo / "manifest.json").read_text())
    # CPU seconds (all threads) depend far less on other jobs than wall time on a shared machine
    return {"wall": wall, "cpu": cpu, "peak_rss_mb": peak_kb / 1024, "manifest": manifest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--books", nargs="+", default=["christmas_carol", "melville-moby_dick"])
    args = parser.parse_args()
    rows = []
    for name in args.books:
        book = data_dir() / "books" / f"{name}.txt"
        runs = sorted((build_once(book) for _ in range(args.runs)), key=lambda r: r["wall"])
        median = runs[len(runs) // 2]
        stats, stages = median["manifest"]["stats"], median["manifest"]["stage_seconds"]
        words = stats["words"]
        rows.append((name, words, median, stats, stages))
        print(f"{name}: {words:,} words, wall {median['wall']:.1f}s "
              f"(runs: {', '.join(format(r['wall'], '.1f') for r in runs)})", flush=True)
    print()
    print("| book | words | passages | wall s | wall s per 100k words | CPU s per 100k words | peak RSS MB | LLM tokens |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, words, run, stats, _ in rows:
        print(f"| {name} | {words:,} | {stats['passages']:,} | {run['wall']:.1f} | {run['wall'] / words * 1e5:.1f} "
              f"| {run['cpu'] / words * 1e5:.1f} | {run['peak_rss_mb']:.0f} | {stats['build_tokens']} |")
    print()
    stage_names = list(rows[0][4])
    print("| book | " + " | ".join(stage_names) + " |")
    print("| --- |" + " ---: |" * len(stage_names))
    for name, _, _, _, stages in rows:
        print(f"| {name} | " + " | ".join(f"{stages.get(s, 0):.1f}" for s in stage_names) + " |")
    print()
    print("| book | entities raw → governed | relations raw → governed | communities raw → governed | isolated raw → governed |")
    print("| --- | --- | --- | --- | --- |")
    for name, _, _, s, _ in rows:
        print(f"| {name} | {s['entities_raw']:,} → {s['entities']:,} | {s['relations_raw']:,} → {s['relations']:,} "
              f"| {s['communities_raw']:,} → {s['communities']:,} | {s['isolated_raw']:,} → {s['isolated']:,} |")


if __name__ == "__main__":
    main()
