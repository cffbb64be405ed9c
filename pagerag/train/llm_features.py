"""The LLM's share of the training tables: P(yes) of the yes/no sufficiency prompt, and the LLM's
answer, on a balanced sample of training examples.

    PAGERAG_LLM__GGUF=$(../shared/tools/local-llm) python -m pagerag.train.llm_features \\
        --corpus /work/corpus/book_corpus.jsonl --repos /work/repos --out /work/features/p_yes.jsonl \\
        [--per-book 20] [--answers]

A local model is slow (~60 prompt tokens/s on two cores), so the sample is small: per training
book up to `--per-book` examples, half answerable and half negative (masked, swapped, borrowed in turn),
drawn with a fixed seed. Each line is written as soon as it is measured and a re-run skips ids
already in the file; every LLM reply is also in the response cache. The excerpts are the ones
`ask` shows (the packaged sentence ranker's order, generate.decide.llm_excerpts), so fit the
no-LLM models first. With `--answers`, answerable examples also get the LLM's answer to the
excerpts (prompts/answer), with the excerpts themselves, so the answer checks can be replayed.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

from .books import TRAIN_BOOKS
from .corpus import read_corpus
from .examples import KINDS, CorpusExample

NEGATIVE_KINDS = tuple(k for k in KINDS if k != "answerable")


def sample(examples: list[CorpusExample], per_book: int, seed: int = 0) -> list[CorpusExample]:
    """Per training book: per_book // 2 answerable examples whose evidence the corpus located, and
    as many negatives taking masked / swapped / borrowed in turn (whichever is left)."""
    rng = random.Random(seed)
    by_book: dict[str, dict[str, list[CorpusExample]]] = defaultdict(lambda: defaultdict(list))
    for e in sorted(examples, key=lambda e: e.id):
        if e.book in TRAIN_BOOKS and (e.kind != "answerable" or e.located):
            by_book[e.book][e.kind].append(e)
    out: list[CorpusExample] = []
    for book in sorted(by_book):
        kinds = by_book[book]
        for pool in kinds.values():
            rng.shuffle(pool)
        half = per_book // 2
        out += kinds["answerable"][:half]
        negatives: list[CorpusExample] = []
        pools = [list(kinds[k]) for k in NEGATIVE_KINDS]
        while len(negatives) < per_book - half and any(pools):
            for pool in pools:
                if pool and len(negatives) < per_book - half:
                    negatives.append(pool.pop(0))
        out += negatives
    return out


def measure(ex: CorpusExample, rag, answers: bool) -> dict:
    from ..generate.answer import llm_answer
    from ..generate.decide import Session, graph_context_for, llm_excerpts, read_ranked
    from ..generate.sufficiency import judge_excerpts, llm_p_yes
    from ..records import StageCost

    cfg = rag.settings.generate
    pipe = Session(rag.settings, rag.state, rag.encode, rag.llm)
    retrieval = rag.retrieve(ex.question, exclude=set(ex.mask_passage_ids))
    reading, ranked = read_ranked(retrieval, pipe)
    excerpts = llm_excerpts(reading, ranked, pipe)
    cost = StageCost()
    shown = judge_excerpts(excerpts, cfg.judge_context_tokens)
    p_yes = llm_p_yes(rag.llm, retrieval.question, shown, cost, graph_context_for(retrieval.hints, shown, rag.settings))
    row = {"id": ex.id, "book": ex.book, "kind": ex.kind, "p_yes": p_yes, "judge_ms": round(cost.latency_ms, 1),
           "judge_prompt_tokens": cost.prompt_tokens}
    if answers and ex.answerable:
        checked, completion = llm_answer(rag.llm, retrieval.question, excerpts, max_tokens=cfg.answer_max_tokens,
                                         temperature=rag.settings.llm.temperature,
                                         graph_context=graph_context_for(retrieval.hints, excerpts, rag.settings))
        row.update(answer=completion.text, answer_ms=round(completion.latency_ms, 1),
                   answer_prompt_tokens=completion.prompt_tokens, gold=ex.answer,
                   excerpts=[{"n": e.n, "passage_id": e.passage_id, "doc_id": e.doc_id, "file": e.file, "start": e.start,
                              "end": e.end, "text": e.text, "n_tokens": e.n_tokens} for e in excerpts])
    return row


def run(corpus: Path, repos: Path, out: Path, per_book: int, answers: bool, log=print) -> None:
    from ..api import PageRAG

    chosen = sample(read_corpus(corpus), per_book)
    done = set()
    if out.is_file():
        done = {json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines() if line.strip()}
    todo = [e for e in chosen if e.id not in done]
    log(f"{len(chosen)} examples sampled, {len(todo)} to measure")
    out.parent.mkdir(parents=True, exist_ok=True)
    rags: dict[str, PageRAG] = {}
    with out.open("a", encoding="utf-8") as sink:
        for i, ex in enumerate(todo, 1):
            if ex.book not in rags:
                rags.clear()  # one book's state at a time
                rags[ex.book] = PageRAG(repos / f"{ex.book}.rag", llm="llamacpp")
            row = measure(ex, rags[ex.book], answers)
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")
            sink.flush()
            log(f"{i}/{len(todo)} {ex.id}: P(yes) {row['p_yes']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pagerag.train.llm_features", description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--repos", required=True)
    ap.add_argument("--out", required=True, help="JSONL to append to (id, p_yes, ...).")
    ap.add_argument("--per-book", type=int, default=20, help="Examples per training book (half answerable).")
    ap.add_argument("--answers", action="store_true", help="Also record the LLM's answer on answerable examples.")
    args = ap.parse_args(argv)
    from ..errors import PageRAGError

    try:
        run(Path(args.corpus), Path(args.repos), Path(args.out), args.per_book, args.answers,
            log=lambda m: print(m, file=sys.stderr, flush=True))
    except PageRAGError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
