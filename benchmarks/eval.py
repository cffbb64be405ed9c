"""The evaluation table of docs/benchmarks.md (Book QA): both books of $PAGERAG_DATA_DIR/qa/ (DEV-A: A Christmas Carol,
DEV-B: An Unsentimental Journey through Cornwall), every pipeline of the paper's Tables 1 and 3.

    python benchmarks/eval.py                              # extractive backend, builds repos once
    python benchmarks/eval.py --limit 10 --out /tmp/e      # a quick slice (10 questions per book)
    python benchmarks/eval.py --llm llamacpp --set llm.gguf=/path/model.gguf --limit 6
    python benchmarks/eval.py --resume                     # continue an interrupted run

It is the same as building the two repositories and running
    pagerag eval corpus:carol-qa corpus:cornwall-qa -r carol.rag -r cornwall.rag --ablations --llm extractive
(the corpora come from the catalog: fetched into the cache, or read in place from $PAGERAG_DATA_DIR).
Prints report.md; results.jsonl, report.json and the plots are in --out.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

BOOKS = [("carol-qa", "christmas-carol", "carol.rag"), ("cornwall-qa", "novel-44557", "cornwall.rag")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/pagerag-eval"), help="Where repositories are built.")
    parser.add_argument("--out", type=Path, default=None, help="Report directory (default: WORK/report-LLM).")
    parser.add_argument("--llm", default="extractive", help="LLM backend for answers (default extractive).")
    parser.add_argument("--judge", default=None, help="Lenient judge backend (default: token recall).")
    parser.add_argument("--limit", type=int, default=None, help="Questions per book (mixed across types).")
    parser.add_argument("--no-ablations", action="store_true", help="Only full and passages-only.")
    parser.add_argument("--set", action="append", default=[], help="section.field=value (repeatable).")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()

    from pagerag.build import build_repository
    from pagerag.commands.eval import ABLATIONS, DEFAULT_PIPELINES, load_tasks
    from pagerag.corpora import resolve_corpus_paths
    from pagerag.errors import PageRAGError
    from pagerag.evaluate.runner import EvalConfig, run_eval
    from pagerag.settings import load_settings

    if not os.environ.get("PAGERAG_DATA_DIR"):
        default = REPO_ROOT.parent / "shared" / "data"
        if default.is_dir():
            os.environ["PAGERAG_DATA_DIR"] = str(default)
    args.work.mkdir(parents=True, exist_ok=True)
    repos = []
    try:
        for _, corpus, repo_name in BOOKS:
            repo = args.work / repo_name
            if not (repo / "manifest.json").is_file():
                print(f"building {repo} from corpus:{corpus}", file=sys.stderr)
                build_repository(resolve_corpus_paths([f"corpus:{corpus}"]), repo, load_settings(),
                                 show_progress=not args.quiet)
            repos.append(repo)
        tasks, notes = load_tasks([f"corpus:{qa}" for qa, _, _ in BOOKS], repos, args.limit)
        pipelines = DEFAULT_PIPELINES + ([] if args.no_ablations else ABLATIONS)
        out = args.out or args.work / f"report-{args.llm}"
        config = EvalConfig(pipelines=pipelines, llm=args.llm, judge=args.judge, sets=args.set, resume=args.resume,
                            show_progress=not args.quiet)
        outcome = run_eval(tasks, out, config, notes=notes)
    except PageRAGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write((out / "report.md").read_text(encoding="utf-8"))
    if not outcome.complete:
        print(f"interrupted: partial report in {out}; rerun with --resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
