"""What the offline decision sees on both sides of every pair: per side the sufficiency model's
inputs and the RCS, per evidence sentence (the first READ_LIMIT, evidence order) its text in its
place in the book, its features, the shipped reader's P and span margin, and whether it holds a
gold answer string (only possible on the side that says). Fitting and measuring decisions and
readers on pairs then needs no repository:

    python benchmarks/pair_table.py --pairs PAIRS --repos PREPOS --out TABLE.jsonl [--per-book N]

One row per pair side (resumable: sides already in TABLE are skipped).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

from pagerag.train.pairs import Pair, _alias_pattern, read_pairs  # noqa: E402


def holds_gold(text: str, answers: list[str]) -> bool:
    return any(_alias_pattern(a).search(text) for a in answers if a.strip())


def side_record(rag, pair: Pair, side: str) -> dict:
    """Retrieve, gate and read one side as `ask` does without an LLM, and keep what it saw."""
    from pagerag.generate.models import book_rcs_model
    from pagerag.generate.decide import Session, sufficiency_inputs
    from pagerag.generate.gate import rcs_gate
    from pagerag.generate.sentences import READ_LIMIT, read_evidence, read_sentences
    from pagerag.read import around
    from pagerag.retrieve.api import retrieve

    pipe = Session(rag.settings, rag.state, rag.encode, None)
    retrieval = retrieve(pair.question, pipe.state, pipe.settings, encode=pipe.encode, llm=None)
    gate = rcs_gate(retrieval, pipe.settings, pipe.state, pipe.encode)
    reading = read_evidence(retrieval.question, retrieval.evidence, pipe.state, pipe.settings.embed.model, pipe.encode)
    read_sentences(retrieval.question, reading.sentences, pipe.state, pipe.read_with())
    rcs = float(book_rcs_model().score(gate.features))
    says = side == pair.says
    sentences = []
    for s in reading.sentences[:READ_LIMIT]:
        ctx = around(pipe.state.source_text(s.window.doc_id), s.start, s.end)
        sentences.append({"text": ctx.sentence, "before": ctx.before, "after": ctx.after,
                          "features": {k: round(float(v), 5) for k, v in s.features.items()},
                          "p": round(s.prob, 5), "margin": round(float(s.margin), 4),
                          "gold": bool(says and holds_gold(ctx.sentence, pair.answers))})
    return {"pair": pair.id, "book": pair.book, "kind": pair.kind, "side": side, "says": says,
            "question": pair.question, "answers": pair.answers, "rcs": rcs, "gate_rcs": gate.rcs,
            "inputs": {k: round(float(v), 5) for k, v in sufficiency_inputs(retrieval, reading, rcs).items()},
            "sentences": sentences}


def main() -> int:
    from pair_qa import sample, side_repo

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=Path, required=True)
    ap.add_argument("--repos", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--per-book", type=int, default=None)
    args = ap.parse_args()
    from pagerag.api import PageRAG

    done = set()
    if args.out.is_file():
        done = {(r["pair"], r["side"]) for r in map(json.loads, args.out.open(encoding="utf-8"))}
    pairs = sample(read_pairs(args.pairs), args.per_book)
    todo = sorted(((p, s) for p in pairs for s in (p.says, p.silent) if (p.id, s) not in done),
                  key=lambda ps: (ps[0].book, ps[1]))
    rag, opened, t0 = None, None, time.perf_counter()
    with args.out.open("a", encoding="utf-8") as fh:
        for i, (pair, side) in enumerate(todo, 1):
            if opened != (pair.book, side):
                rag, opened = PageRAG(side_repo(args.repos, pair.book, side), llm="extractive"), (pair.book, side)
            fh.write(json.dumps(side_record(rag, pair, side), ensure_ascii=False) + "\n")
            fh.flush()
            if i % 25 == 0:
                print(f"{i}/{len(todo)} sides, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
