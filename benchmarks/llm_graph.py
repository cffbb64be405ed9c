"""The LLM-extracted graph against the spaCy one, on one book: cost, size, and evidence recall.

    # build the LLM graph first (slow with a local 1.5B: hours for an 18k-word book)
    PAGERAG_LLM__GGUF=$(../shared/tools/local-llm) pagerag build BOOK.txt --repo llm.rag --extractor llm
    python benchmarks/llm_graph.py --nlp nlp.rag --llm llm.rag --book Novel-25646 [--ranker R.json] [--json out.json]
    python benchmarks/llm_graph.py --nlp nlp.rag --book Novel-25646 --prompts-only   # the prompt cost, no LLM
    # a slice (the first ~3,300 words) when the whole book would take hours: both repositories from
    # the same slice, recall only over the questions whose evidence the slice holds
    python benchmarks/llm_graph.py --nlp slice-nlp.rag --llm slice-llm.rag --book Novel-25646 --held-only

Reports, per repository: build prompt tokens per book token (the model's own count, and the
prompts re-counted with tiktoken cl100k so the ratio compares with GraphRAG's, LightRAG's and
nano-graphrag's published 5.8–9.5×), completion tokens, entities / relations / communities raw
-> governed, and evidence recall at the budget of the book's GraphRAG-Bench questions for
`full` on each graph (and `passages-only`, which is the same on both: same passages). `--ranker`
should name a ranker fitted without this book (python -m pagerag.train.ranker --books ...), so
that neither graph is scored by a ranker that has seen its questions.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))


def book_tokens(repo: Path) -> int:
    """cl100k tokens of the book's text as stored (sources/), Gutenberg header and licence excluded."""
    from pagerag.offline import count_tokens
    from pagerag.repository import Repository

    r = Repository.open(repo)
    total = 0
    for doc_id in sorted({p.doc_id for p in r.passages}):
        text = r.source_text(doc_id)
        passages = [p for p in r.passages if p.doc_id == doc_id]
        total += count_tokens(text[min(p.start for p in passages):max(p.end for p in passages)])
    return total


def prompt_tokens_cl100k(repo: Path) -> int:
    """The extraction prompts of every passage, rendered as the build sent them, in cl100k tokens."""
    from pagerag.llm import count_message_tokens, render_prompt
    from pagerag.repository import Repository

    return sum(count_message_tokens(render_prompt("extract_graph", passage=p.text)) for p in Repository.open(repo).passages)


def graph_stats(repo: Path) -> dict:
    from collections import Counter

    from pagerag.repository import Repository

    manifest = json.loads((repo / "manifest.json").read_text(encoding="utf-8"))
    stats = manifest["stats"]
    raw = Repository.open(repo).graph("raw")
    return {"extractor": manifest.get("extractor"), "build_tokens": manifest.get("build_tokens"),
            **{k: stats[k] for k in ("entities_raw", "entities", "relations_raw", "relations", "communities_raw",
                                     "communities", "isolated_raw", "isolated")},
            "entity_types_raw": dict(Counter(e.type for e in raw.entities).most_common())}


def recall(repo: Path, book: str, data_dir: Path, ranker: str, pipelines: tuple[str, ...], held: bool = False) -> dict:
    """Evidence recall of the book's questions per pipeline; `held`: only the questions whose every
    evidence statement some passage of `repo` locates (for a repository of part of the book)."""
    from pagerag.evaluate.scoring import statement_located
    from pagerag.repository import Repository
    from pagerag.retrieve.api import get_encoder, retrieve, single_threaded_blas
    from pagerag.settings import load_settings

    rows = json.loads((data_dir / "graphrag-bench-novel" / "questions.json").read_text(encoding="utf-8"))
    questions = [r for r in rows if r["source"] == book and any(e.strip() for e in r.get("evidence") or [])]
    if held:
        texts = [p.text for p in Repository.open(repo).passages]
        questions = [q for q in questions if all(statement_located(e, texts) for e in q["evidence"] if e.strip())]
    out: dict = {}
    for name in pipelines:
        overrides = {"retrieve": {"ranker_model": ranker}} if ranker else {}
        settings = load_settings(pipeline=name, environ={}, overrides=overrides)
        encode = get_encoder(settings)
        by_type = defaultdict(list)
        with single_threaded_blas():
            for q in questions:
                spans = [e.text for e in retrieve(q["question"], repo, settings, encode=encode).evidence]
                gold = [e for e in q["evidence"] if e.strip()]
                value = sum(statement_located(g, spans) for g in gold) / len(gold)
                by_type[q["question_type"]].append(value)
                by_type["ALL"].append(value)
        out[name] = {t: (round(statistics.mean(v), 3), len(v)) for t, v in sorted(by_type.items())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nlp", required=True, help="Repository built with --extractor nlp.")
    ap.add_argument("--llm", default="", help="The same book built with --extractor llm.")
    ap.add_argument("--prompts-only", action="store_true",
                    help="No LLM run needed: the extraction prompts `--extractor llm` would send for the --nlp "
                    "repository's passages, rendered and counted (cl100k), per book token.")
    ap.add_argument("--book", required=True, help="GraphRAG-Bench id of the book (for its questions).")
    ap.add_argument("--data", default=os.environ.get("PAGERAG_DATA_DIR", str(REPO_ROOT.parent / "shared" / "data")))
    ap.add_argument("--ranker", default="", help="Ranker JSON fitted without this book (default: the packaged one).")
    ap.add_argument("--held-only", action="store_true",
                    help="Recall only over the questions whose whole evidence the repositories hold (for a "
                    "repository built from part of the book, e.g. its first chapters).")
    ap.add_argument("--json", dest="json_out", default="")
    args = ap.parse_args()
    result = {}
    tokens = book_tokens(Path(args.nlp))
    if args.prompts_only:
        prompts = prompt_tokens_cl100k(Path(args.nlp))
        print(json.dumps({"book_tokens_cl100k": tokens, "prompt_tokens_cl100k": prompts,
                          "prompt_per_book_token_cl100k": round(prompts / tokens, 2)}, indent=1))
        return
    if not args.llm:
        ap.error("--llm is required unless --prompts-only")
    for label, repo in (("nlp", Path(args.nlp)), ("llm", Path(args.llm))):
        stats = graph_stats(repo)
        if label == "llm":
            stats["prompt_tokens_cl100k"] = prompt_tokens_cl100k(repo)
            stats["prompt_per_book_token"] = round(stats["build_tokens"]["prompt"] / tokens, 2)
            stats["prompt_per_book_token_cl100k"] = round(stats["prompt_tokens_cl100k"] / tokens, 2)
        pipelines = ("full", "passages-only") if label == "nlp" else ("full",)
        stats["recall"] = recall(repo, args.book, Path(args.data), args.ranker, pipelines, args.held_only)
        result[label] = stats
    result["book_tokens_cl100k"] = tokens
    print(json.dumps(result, indent=1))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
