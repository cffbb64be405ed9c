"""Issue 30: what the community operator's vector is worth to evidence recall, on training books.

A community's vector (half of the community operator's relevance; the other half is its passages'
similarity) was the embedding of its title and summary: a library's add embedded every re-made
community's summary again (~1,400 at 1,000 documents, ~10 s). It is now composed from vectors
the repository holds (`retrieve.views.composed_community_vectors`). This measures evidence recall
of the training books' GraphRAG-Bench questions with each kind of vector put in its place:

    embedded   the title + summary embedded (what the operator read before)
    composed   central members' name vectors + central passages' vectors (today)
    random     a random unit vector per community (the vector's ranking thrown away)
    zero       no vector (relevance from the passages alone)

    python benchmarks/community_vectors.py --repos DIR      # DIR/Novel-<id>.rag per training book

The repositories are plain `pagerag build` of ../shared/data/graphrag-bench-novel/texts/<book>.txt.
Recall counts a gold statement as found when 60% of its content words are in one evidence span
(`statement_located`, the rule benchmarks/retrieval.py uses).
"""
from __future__ import annotations

import argparse
import collections
import json
import os
from pathlib import Path

import numpy as np

TRAINING = ("Novel-10146 Novel-10321 Novel-10356 Novel-2544 Novel-25646 Novel-26183 Novel-29973 Novel-30752 "
            "Novel-40700 Novel-4128 Novel-41603 Novel-47558 Novel-51410 Novel-58553 Novel-8559").split()


def book_questions(data: Path, book: str) -> list[dict]:
    rows = json.loads((data / "graphrag-bench-novel" / "questions.json").read_text(encoding="utf-8"))
    return [r for r in sorted(rows, key=lambda r: r["id"])
            if r.get("source") == book and any(e.strip() for e in r.get("evidence") or [])]


def variants(rag, view) -> dict[str, np.ndarray]:
    composed = rag.state.community_vectors(view.kind)
    embedded = np.asarray(rag.encode([f"{c.title}. {c.summary}" for c in view.graph.communities]), np.float32)
    noise = np.random.default_rng(0).normal(size=composed.shape).astype(np.float32)
    return {"embedded": embedded, "composed": composed,
            "random": noise / np.linalg.norm(noise, axis=1, keepdims=True), "zero": np.zeros_like(composed)}


def measure(repo: Path, questions: list[dict]) -> dict[str, list[tuple[str, float]]]:
    from pagerag.api import PageRAG
    from pagerag.evaluate.scoring import statement_located

    rag = PageRAG(repo, pipeline="full", llm="extractive")
    view = rag.state.view("governed")
    out: dict[str, list[tuple[str, float]]] = {}
    for name, vectors in variants(rag, view).items():
        view._community_vectors = vectors  # what the operator reads for this run
        out[name] = []
        for q in questions:
            spans = [e.text for e in rag.retrieve(q["question"]).evidence]
            gold = [g for g in q["evidence"] if g.strip()]
            out[name].append((q["question_type"], sum(statement_located(g, spans) for g in gold) / len(gold)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=Path, required=True, help="directory with <book>.rag per training book")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("PAGERAG_DATA_DIR", "../shared/data")))
    args = parser.parse_args()
    totals: dict[str, dict[str, list[float]]] = collections.defaultdict(lambda: collections.defaultdict(list))
    for book in TRAINING:
        repo = args.repos / f"{book}.rag"
        if not repo.is_dir():
            raise SystemExit(f"{repo}: missing; build it with `pagerag build` first")
        for name, rows in measure(repo, book_questions(args.data, book)).items():
            for kind, recall in rows:
                totals[name]["ALL"].append(recall)
                totals[name][kind].append(recall)
        print(book, {name: round(float(np.mean(t["ALL"])), 4) for name, t in totals.items()}, flush=True)
    kinds = sorted({k for t in totals.values() for k in t if k != "ALL"}) + ["ALL"]
    print("| vector | " + " | ".join(f"{k} (n={len(totals['composed'][k])})" for k in kinds) + " |")
    print("|---|" + "---:|" * len(kinds))
    for name, t in totals.items():
        print(f"| {name} | " + " | ".join(f"{np.mean(t[k]):.4f}" for k in kinds) + " |")


if __name__ == "__main__":
    main()
