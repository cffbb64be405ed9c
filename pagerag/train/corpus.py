"""The book training corpus: GraphRAG-Bench questions made into answerable, masked, swapped and
borrowed examples over each book's repository, with evidence passages and sentence labels.

    python -m pagerag.train.corpus --repos /work/repos --out corpus-out
    # reads $PAGERAG_DATA_DIR/graphrag-bench-novel/questions.json and <repos>/<Novel-id>.rag
    # (build each with `pagerag build <book>.txt --repo <repos>/<Novel-id>.rag`, default settings);
    # writes corpus-out/book_corpus.jsonl (one CorpusExample per line) and corpus-out/stats.json

The output depends only on the repositories, the questions and the seed (re-runs are identical).
Examples of the five test books are written too (split = test) for reporting; no rule here was
chosen by looking at them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

from ..evaluate.scoring import EVIDENCE_LOCATED, content_words
from . import borrow, locate, mask, qa_sets, swap
from .books import TEST_BOOKS, TRAIN_BOOKS, load_questions, split_of
from .locate import BookIndex
from .examples import KINDS, CorpusExample

NEGATIVE_KINDS = KINDS[1:]  # masked, swapped, borrowed

# Creative Generation ("Imagine you are X; write a diary entry ...") has no missing detail that a
# refusal could be about, so it gives answerable examples only. A Contextual Summarize question
# sums up several facts about several people: with one name swapped most of it stays answerable
# (2 of 4 such swaps failed the hand check on training books), so it is masked, never swapped.
NEGATIVE_TYPES = ("Fact Retrieval", "Complex Reasoning", "Contextual Summarize")
SWAP_TYPES = ("Fact Retrieval", "Complex Reasoning")
CORPUS_FILE = "book_corpus.jsonl"
STATS_FILE = "stats.json"


def build_book(book: str, repo_path: Path, questions: list[dict], seed: int = 0,
               split: str | None = None) -> tuple[list[CorpusExample], dict]:
    """The answerable, masked and swapped examples of one book and its statistics (`split`
    defaults to the book's split); `BookBuild.borrowed` adds the borrowed ones."""
    build = BookBuild(book, repo_path, seed, split)
    return build.examples(questions), build.stats.to_dict()


class BookBuild:
    """One book's repository opened for making examples."""

    def __init__(self, book: str, repo_path: Path, seed: int = 0, split: str | None = None):
        from ..repository import Repository

        self.book, self.split, self.seed = book, split or split_of(book), seed
        self.index = BookIndex.open(repo_path)
        self.names = mask.NameIndex(self.index)
        repo = Repository.open(repo_path)
        self.swapper = swap.Swapper(self.index, repo.graph("governed"), seed)
        self.stats = _BookStats(self.split, repo, self.index)

    def examples(self, questions: list[dict]) -> list[CorpusExample]:
        return _examples(self.book, self.split, questions, self.index, self.names, self.swapper, self.stats)

    def written(self, data_dir: Path) -> list[CorpusExample]:
        """The book's written question set (qa/train), when it has one: answerable and written."""
        path = qa_sets.qa_file(data_dir, self.book)
        if not path.is_file():
            return []
        made = qa_sets.qa_examples(self.book, self.split, qa_sets.read_qa(path), self.index)
        for ex in made:
            if ex.kind == "written":
                self.stats.add_negative("written", ex, None)
            else:
                self.stats.add_written_answerable(ex)
        return made

    def portable(self, questions: list[dict]) -> list[borrow.Portable]:
        return borrow.portable_questions(self.book, questions, self.swapper)

    def borrowed(self, sources: list[borrow.Portable]) -> list[CorpusExample]:
        made, rejected = borrow.borrowed_examples(self.book, self.split, self.swapper, sources, self.seed)
        for ex in made:
            self.stats.add_negative("borrowed", ex, ex.question_type)
        self.stats.rejected["borrowed"].update(rejected)
        return made


def _examples(book: str, split: str, questions: list[dict], index: BookIndex, names: mask.NameIndex,
              swapper: swap.Swapper, book_stats: "_BookStats") -> list[CorpusExample]:
    examples: list[CorpusExample] = []
    for q in questions:
        base, locations = answerable_example(book, split, q, index)
        examples.append(base)
        book_stats.add_answerable(base)
        if base.question_type not in NEGATIVE_TYPES:
            continue
        masked = masked_example(base, locations, index, names)
        book_stats.add_negative("masked", masked, base.question_type)
        if isinstance(masked, CorpusExample):
            examples.append(masked)
        if base.question_type not in SWAP_TYPES:
            continue
        swapped = swapped_example(base, index, swapper)
        book_stats.add_negative("swapped", swapped, base.question_type)
        if isinstance(swapped, CorpusExample):
            examples.append(swapped)
    return examples


def answerable_example(book: str, split: str, q: dict, index: BookIndex) -> tuple[CorpusExample, list[locate.Location]]:
    """The question as GraphRAG-Bench asks it, with where its evidence and answer are."""
    statements = [s for s in q.get("evidence") or [] if s.strip()]
    words = [content_words(s) for s in statements]
    locations = [index.locate(w) for w in words]
    pid = lambda r: index.passages[r].passage_id  # noqa: E731
    spans = [span for i, (w, loc) in enumerate(zip(words, locations)) for span in index.evidence_sentences(i, w, loc.best)]
    best_rows = sorted({r for loc in locations for r in loc.best})
    example = CorpusExample(
        id=q["id"], book=book, split=split, kind="answerable", question=q["question"], answer=q["answer"],
        question_type=q["question_type"], source_id=q["id"], evidence=statements,
        evidence_passage_ids=[[pid(r) for r in loc.best] for loc in locations],
        evidence_coverage=[round(loc.coverage, 4) for loc in locations],
        evidence_spans=spans, answer_spans=index.answer_sentences(q["answer"], best_rows),
    )
    return example, locations


def masked_example(base: CorpusExample, locations: list[locate.Location], index: BookIndex,
                   names: mask.NameIndex) -> CorpusExample | str:
    """The masked negative of an answerable example, or why there is none."""
    words = [content_words(s) for s in base.evidence]
    m = mask.mask_for(index, names, base.question, base.answer, locations, words)
    why = mask.usable(locations, m)
    if why is not None:
        return why
    left = mask.unmasked_locating(index, words, m.rows)
    if left:  # cannot happen: every locating passage is in the mask by construction
        raise AssertionError(f"{base.id}: passages {left} still locate the evidence after masking")
    return replace(base, id=f"{base.id}:masked", kind="masked",
                   mask_passage_ids=[index.passages[r].passage_id for r in sorted(m.rows)])


def swapped_example(base: CorpusExample, index: BookIndex, swapper: swap.Swapper) -> CorpusExample | str:
    """The swapped negative of an answerable example, or why there is none. Its evidence
    passages are those that name the new character and locate an altered statement: none."""
    made = swapper.swap(base.source_id, base.question, base.evidence, base.answer)
    if isinstance(made, str):
        return made
    info, question, statements = made
    rows = swapper.rows_naming(swapper.character(info.to_entity))
    coverage = [max((len(content_words(s) & index.words[r]) / max(len(content_words(s)), 1) for r in rows), default=0.0)
                for s in statements]
    return CorpusExample(
        id=f"{base.id}:swapped", book=base.book, split=base.split, kind="swapped", question=question,
        answer=base.answer, question_type=base.question_type, source_id=base.source_id, evidence=statements,
        evidence_passage_ids=[[] for _ in statements], evidence_coverage=[round(c, 4) for c in coverage], swap=info,
    )


class _BookStats:
    def __init__(self, split: str, repo, index: BookIndex):
        settings = repo.manifest.get("settings", {})
        self.info = {
            "split": split, "passages": len(index.passages),
            "sources": [s.get("sha256") for s in repo.manifest.get("sources", [])],
            "chunk": settings.get("chunk", {}),
        }
        self.counts: Counter[str] = Counter()
        self.rejected: dict[str, Counter[str]] = {k: Counter() for k in NEGATIVE_KINDS}
        self.mask_sizes: list[int] = []
        self.by_type: dict[str, Counter[str]] = defaultdict(Counter)

    def add_answerable(self, ex: CorpusExample) -> None:
        self.counts["answerable"] += 1
        t = self.by_type[ex.question_type]
        t["questions"] += 1
        t["located_all"] += ex.located
        t["statements"] += len(ex.evidence)
        t["statements_located"] += sum(1 for ids in ex.evidence_passage_ids if ids)
        t["with_answer_sentence"] += bool(ex.answer_spans)
        t["evidence_spans"] += len(ex.evidence_spans)
        t["evidence_spans_located"] += sum(s.score >= EVIDENCE_LOCATED for s in ex.evidence_spans)

    def add_written_answerable(self, ex: CorpusExample) -> None:
        """An answerable question of the written set (counted apart from GraphRAG-Bench's)."""
        self.counts["qa_answerable"] += 1
        self.counts["qa_located"] += ex.located and all(c == 1.0 for c in ex.evidence_coverage)
        self.counts["qa_with_answer_sentence"] += bool(ex.answer_spans)

    def add_negative(self, kind: str, made: CorpusExample | str, question_type: str | None) -> None:
        """`question_type` None: a negative of no GraphRAG-Bench type (a written one)."""
        if isinstance(made, str):
            self.rejected[kind][made] += 1
            return
        self.counts[kind] += 1
        if question_type is not None:
            self.by_type[question_type][kind] += 1
        if kind == "masked":
            self.mask_sizes.append(len(made.mask_passage_ids))

    def to_dict(self) -> dict:
        sizes = self.mask_sizes
        return {**self.info, **{k: self.counts[k] for k in KINDS},
                **{k: self.counts[k] for k in ("qa_answerable", "qa_located", "qa_with_answer_sentence")},
                "rejected": {k: dict(sorted(v.items())) for k, v in self.rejected.items()},
                "mask_size": {"median": statistics.median(sizes) if sizes else 0, "max": max(sizes, default=0)},
                "by_type": {t: dict(sorted(c.items())) for t, c in sorted(self.by_type.items())}}


def summarise(per_book: dict[str, dict]) -> dict:
    """Totals per split and per split x question type."""
    splits: dict[str, Counter[str]] = defaultdict(Counter)
    types: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for b in per_book.values():
        splits[b["split"]].update({k: b.get(k, 0) for k in (*KINDS, "qa_answerable")} | {"books": 1})
        for t, c in b["by_type"].items():
            types[b["split"]][t].update(c)
    rejected: dict[str, dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for b in per_book.values():
        for kind, reasons in b["rejected"].items():
            rejected[b["split"]][kind].update(reasons)
    return {"splits": {s: dict(c) for s, c in sorted(splits.items())},
            "by_type": {s: {t: dict(c) for t, c in sorted(v.items())} for s, v in sorted(types.items())},
            "rejected": {s: {k: dict(sorted(c.items())) for k, c in sorted(v.items())} for s, v in sorted(rejected.items())}}


def rules() -> dict:
    return {"evidence_located": EVIDENCE_LOCATED, "max_window_sentences": locate.MAX_WINDOW,
            "answer_recall": locate.ANSWER_RECALL, "max_mask": mask.MAX_MASK, "ubiquitous_name": mask.UBIQUITOUS_NAME,
            "near_coverage": mask.NEAR_COVERAGE, "near_min_words": mask.NEAR_MIN_WORDS,
            "swap_min_mentions": swap.MIN_MENTIONS, "swap_tries": swap.TRIES, "negative_types": list(NEGATIVE_TYPES),
            "swap_types": list(SWAP_TYPES), "borrow_max_content_words": borrow.MAX_CONTENT_WORDS,
            "borrow_max_cast": borrow.MAX_CAST, "borrow_per_book": borrow.PER_BOOK, "borrow_tries": borrow.TRIES}


def build_corpus(repos: Path, data_dir: Path, out: Path, books: list[str] | None = None, seed: int = 0,
                 log=print) -> dict:
    """Write out/book_corpus.jsonl and out/stats.json; returns the statistics."""
    questions = load_questions(data_dir)
    books = books or [b for b in sorted(TRAIN_BOOKS + TEST_BOOKS) if (repos / f"{b}.rag").is_dir()]
    missing = [b for b in books if not (repos / f"{b}.rag").is_dir()]
    if missing or not books:
        from ..errors import InputError

        raise InputError(f"{repos}: no repository {missing[0] if missing else '<Novel-id>'}.rag "
                         f"(build it with `pagerag build <book>.txt --repo {repos}/<Novel-id>.rag`)")
    out.mkdir(parents=True, exist_ok=True)
    per_book: dict[str, dict] = {}
    builds: dict[str, BookBuild] = {}
    portable: list[borrow.Portable] = []
    tmp = out / (CORPUS_FILE + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for book in books:
            t0 = time.perf_counter()
            builds[book] = build = BookBuild(book, repos / f"{book}.rag", seed)
            _write(fh, build.examples(questions.get(book, [])))
            if build.split == "train":  # written sets exist for training books only
                _write(fh, build.written(data_dir))
            if build.split == "train":  # borrowed questions come from training books only
                portable += build.portable(questions.get(book, []))
            log(f"{book} ({build.split}): {build.stats.counts['answerable']} answerable, {build.stats.counts['masked']} "
                f"masked, {build.stats.counts['swapped']} swapped [{time.perf_counter() - t0:.1f}s]")
        log(f"{len(portable)} portable training questions to borrow")
        for book, build in builds.items():
            _write(fh, build.borrowed(portable))
            per_book[book] = build.stats.to_dict()
            log(f"{book}: {per_book[book]['borrowed']} borrowed")
    tmp.replace(out / CORPUS_FILE)
    stats = {"seed": seed, "rules": rules(), "books": per_book, **summarise(per_book)}
    (out / STATS_FILE).write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return stats


def _write(fh, examples: list[CorpusExample]) -> None:
    for ex in examples:
        fh.write(json.dumps(ex.to_dict(), ensure_ascii=False) + "\n")


def read_corpus(path: Path) -> list[CorpusExample]:
    return [CorpusExample.from_dict(json.loads(line)) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pagerag.train.corpus", description=__doc__.split("\n")[0])
    ap.add_argument("--repos", required=True, help="Folder holding <Novel-id>.rag repositories.")
    ap.add_argument("--out", required=True, help="Output folder (book_corpus.jsonl, stats.json).")
    ap.add_argument("--data", default=os.environ.get("PAGERAG_DATA_DIR", ""),
                    help="Data folder holding graphrag-bench-novel/ (default: $PAGERAG_DATA_DIR).")
    ap.add_argument("--books", default="", help="Comma-separated book ids (default: every book with a repository).")
    ap.add_argument("--seed", type=int, default=0, help="Seed of the swapped-name choice.")
    args = ap.parse_args(argv)
    from ..errors import PageRAGError

    try:
        if not args.data:
            raise PageRAGError("no data folder: pass --data or set PAGERAG_DATA_DIR")
        books = [b for b in args.books.split(",") if b] or None
        for b in books or []:
            split_of(b)
        stats = build_corpus(Path(args.repos), Path(args.data), Path(args.out), books, args.seed,
                             log=lambda m: print(m, file=sys.stderr, flush=True))
    except (PageRAGError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_stats(stats)
    return 0


def print_stats(stats: dict) -> None:
    print("| book | split | passages | answerable | located (all statements) | masked | swapped | borrowed "
          "| written answerable (quotes found verbatim, with answer sentence) | written unanswerable |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for book, b in sorted(stats["books"].items(), key=lambda kv: (kv[1]["split"] != "train", kv[0])):
        located = sum(t["located_all"] for t in b["by_type"].values())
        print(f"| {book} | {b['split']} | {b['passages']} | {b['answerable']} | {located} | {b['masked']} | {b['swapped']} "
              f"| {b['borrowed']} | {b.get('qa_answerable', 0)} ({b.get('qa_located', 0)}, "
              f"{b.get('qa_with_answer_sentence', 0)}) | {b.get('written', 0)} |")
    for split, c in stats["splits"].items():
        print(f"| ALL {split} ({c['books']} books) | {split} | | {c['answerable']} | | {c['masked']} | {c['swapped']} "
              f"| {c['borrowed']} | {c.get('qa_answerable', 0)} | {c.get('written', 0)} |")
    print("\n| split | question type | questions | all evidence located | statements located | with answer sentence "
          "| masked | swapped | borrowed |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for split, types in stats["by_type"].items():
        for t, c in types.items():
            print(f"| {split} | {t} | {c['questions']} | {c['located_all'] / c['questions']:.2f} | "
                  f"{c['statements_located'] / max(c['statements'], 1):.2f} | {c['with_answer_sentence'] / c['questions']:.2f} "
                  f"| {c.get('masked', 0)} | {c.get('swapped', 0)} | {c.get('borrowed', 0)} |")
    print("\nno negative made, by reason:", json.dumps(stats["rejected"], sort_keys=True))


if __name__ == "__main__":
    sys.exit(main())
