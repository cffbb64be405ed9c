"""The book training corpus, end to end: build a repository for each GraphRAG-Bench novel that
has none yet (default settings, one `pagerag build` process at a time), then write the corpus.

    python benchmarks/book_corpus.py --repos /work/repos --out corpus-out [--books Novel-10146,...]

Repositories are data artefacts (never committed): <repos>/<Novel-id>.rag. For each build the
script prints words, passages, wall seconds and the 1-minute load average before and after (the
machine is shared, so wall time depends on other jobs). Then it runs
`python -m pagerag.train.corpus --repos <repos> --out <out>`, which writes book_corpus.jsonl and
stats.json (see pagerag/train/corpus.py) and prints the corpus statistics.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))


def data_dir() -> Path:
    return Path(os.environ.get("PAGERAG_DATA_DIR") or REPO_ROOT.parent / "shared" / "data")


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0]) if Path("/proc/loadavg").exists() else float("nan")


def build(text: Path, repo: Path) -> dict:
    before, t0 = load(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pagerag", "build", str(text), "--repo", str(repo), "--quiet"],
                          capture_output=True, text=True)
    seconds, after = time.perf_counter() - t0, load()
    if done.returncode != 0:
        raise SystemExit(f"build of {text.name} failed: {done.stderr.strip().splitlines()[-1:]}")
    return {"seconds": round(seconds, 1), "load_before": before, "load_after": after}


def main() -> None:
    from pagerag.train.books import TEST_BOOKS, TRAIN_BOOKS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repos", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--books", default=",".join(sorted(TRAIN_BOOKS + TEST_BOOKS)))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    repos, texts = Path(args.repos), data_dir() / "graphrag-bench-novel" / "texts"
    repos.mkdir(parents=True, exist_ok=True)
    print("| book | words | passages | build s | load before/after |")
    print("| --- | ---: | ---: | ---: | --- |")
    for book in args.books.split(","):
        repo = repos / f"{book}.rag"
        info = build(texts / f"{book}.txt", repo) if not (repo / "manifest.json").is_file() else None
        manifest = json.loads((repo / "manifest.json").read_text())
        stats = manifest.get("stats", {})
        words, passages = stats.get("words", 0), stats.get("passages", "?")
        cell = f"{info['seconds']} | {info['load_before']:.1f}/{info['load_after']:.1f}" if info else "(existing) |"
        print(f"| {book} | {words:,} | {passages} | {cell} |", flush=True)
    subprocess.run([sys.executable, "-m", "pagerag.train.corpus", "--repos", str(repos), "--out", args.out,
                    "--data", str(data_dir()), "--books", args.books, "--seed", str(args.seed)], check=True)


if __name__ == "__main__":
    main()
