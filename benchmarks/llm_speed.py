"""How long a question takes with the local LLM judge reading excerpt by excerpt.

    PAGERAG_LLM__GGUF=$(../shared/tools/local-llm) python benchmarks/llm_speed.py \\
        --repos PREPOS [--n 10]

Takes `--n` training-book pairs (pagerag.train.pairs; the first of the packaged calibration
order, so every book in turn) and asks each question once, alternately of the book that states
its answer and of the one that does not, in one process (the model loaded once, a warm-up
question first), with the LLM response cache off: wall seconds per question, the judge stage's
prompt and completion tokens, how many excerpts were read, and whether it answered. Prints the
median and every run, with the load average at the start and the end.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))


def main() -> int:
    from pagerag.api import PageRAG
    from pagerag.evaluate.llm_calibration import read_sample
    from pagerag.generate.models import CALIBRATION_SAMPLE

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repos", type=Path, required=True, help="the pairs' repositories (benchmarks/pair_qa.py build)")
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    gguf = os.environ.get("PAGERAG_LLM__GGUF", "")
    if not gguf:
        raise SystemExit("error: set PAGERAG_LLM__GGUF (../shared/tools/local-llm prints the local 1.5B)")
    rows = read_sample(CALIBRATION_SAMPLE)[: args.n]
    sides = {"insert": ("augmented", "original"), "cut": ("original", "cut")}
    load = [os.getloadavg()[0]]
    runs = []
    for i, row in enumerate(rows):
        side = sides[row["kind"]][i % 2]
        rag = PageRAG(args.repos / row["book"] / f"{side}.rag", llm={"backend": "llamacpp", "gguf": gguf, "cache": False})
        if i == 0:
            rag.ask("Who is the main character of the book?")  # warm-up: the model load, the first prompt
        started = time.perf_counter()
        answer = rag.ask(row["question"])
        wall = time.perf_counter() - started
        judge = answer.tokens.get("judge", {})
        runs.append({"pair": row["pair"], "side": side, "wall_s": round(wall, 1), "decision": answer.decision,
                     "excerpts_read": len(answer.judged), "judge_prompt_tokens": judge.get("prompt", 0),
                     "judge_completion_tokens": judge.get("completion", 0),
                     "judge_s": round(answer.latency_ms.get("judge", 0) / 1000, 1)})
        print(json.dumps(runs[-1]), flush=True)
    load.append(os.getloadavg()[0])
    walls = [r["wall_s"] for r in runs]
    summary = {"n": len(runs), "median_wall_s": statistics.median(walls), "max_wall_s": max(walls),
               "median_judge_s": statistics.median(r["judge_s"] for r in runs),
               "answered": sum(r["decision"] == "answered" for r in runs), "load": load, "runs": runs}
    print(f"\nmedian {summary['median_wall_s']:.1f} s a question (judge {summary['median_judge_s']:.1f} s), max "
          f"{summary['max_wall_s']:.1f} s; {summary['answered']} of {len(runs)} answered; load {load[0]:.2f} -> {load[1]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
