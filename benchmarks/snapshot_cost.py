"""What a repository version's query snapshot costs: writing it (every build and add does, at the
end), loading it (every cold question does), and loading its governed view's pickle with the
cyclic garbage collector running and paused.

    python benchmarks/snapshot_cost.py LIB.rag [--repeat 3]

Each repeat writes the snapshot into a fresh cache directory (PAGERAG_CACHE_DIR is set to it),
then loads the state and its governed view in a new process, as a cold question would. Prints
every run and the medians. Measure with nothing else running.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

WRITE = """
import time; t = time.perf_counter()
from pagerag.update import write_query_snapshot
write_query_snapshot({repo!r}); print(time.perf_counter() - t)
"""
LOAD = """
import time; t = time.perf_counter()
from pagerag.retrieve.state import get_state
get_state({repo!r}).view("governed"); print(time.perf_counter() - t)
"""
PICKLE = """
import gc, glob, pickle, time
data = open(glob.glob({cache!r} + "/**/*-governed-snapshot.pkl", recursive=True)[0], "rb").read()
for paused in (False, True):
    gc.collect(); gc.disable() if paused else gc.enable()
    t = time.perf_counter(); view = pickle.loads(data); print(time.perf_counter() - t)
    gc.enable(); del view
"""


def timed(code: str, cache: str) -> list[float]:
    env = {**os.environ, "PAGERAG_CACHE_DIR": cache}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          check=True)
    return [float(line) for line in done.stdout.split()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    repo = str(args.repo.resolve())
    runs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            write, = timed(WRITE.format(repo=repo), cache)
            load, = timed(LOAD.format(repo=repo), cache)
            with_gc, paused = timed(PICKLE.format(cache=cache), cache)
        runs.append((write, load, with_gc, paused))
        print(f"run {i + 1}: snapshot written {write:.2f} s; state and governed view loaded {load:.2f} s; "
              f"the view's pickle loaded {with_gc:.2f} s with the collector, {paused:.2f} s paused", flush=True)
    med = [statistics.median(col) for col in zip(*runs)]
    print(f"median of {len(runs)}: written {med[0]:.2f} s, loaded {med[1]:.2f} s, view pickle {med[2]:.2f} s "
          f"with the collector / {med[3]:.2f} s paused")


if __name__ == "__main__":
    main()
