"""Pairs: the same question asked of a book that states its answer and of one that does not.

On the natural question sets the wording of a question predicts its label (a classifier that
never opens the book separates them at AUC 0.80 held out by book), so answer-or-refuse is fitted
and measured on pairs, where the wording is identical on both sides and only reading can tell:

    insert  an unanswerable question of a written set, asked of its book (silent) and of a copy
            with one or two written sentences that answer it (`qa/train/<book>.insert.jsonl`,
            checked and inserted by `$PAGERAG_DATA_DIR/../tools/insert-qa`)
    cut     an answerable fact question asked of its book (says) and of a copy with its evidence
            sentences and every sentence that holds a gold answer string cut; kept only when the
            gold strings are gone from the cut copy and few sentences had to go (books restate
            facts: a question whose answer sits in many sentences is not cut)

    python -m pagerag.train.pairs --books train --out PAIRS      # texts + pairs.jsonl per book
    python -m pagerag.train.pairs --books test --out PAIRS --cut-only
    python -m pagerag.train.pairs --books test --out PAIRS --inserts benchmarks/pairs   # + written inserts

writes PAIRS/<book>/pairs.jsonl and PAIRS/<book>/<side>/<book>.txt for the sides original, augmented
and cut; each pair names the text that states
its answer (`says`: original | augmented) and the one that does not (`silent`: original | cut).
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..text.sentences import split_sentences

MAX_CUT_SENTENCES = 4  # sentences one cut question may take; more means the book restates it
MAX_CUT_SHARE = 0.02  # of a book's sentences, for all its cut questions together
MIN_ANSWER_CHARS = 3
MAX_ANSWER_WORDS = 6
SIDES = ("original", "augmented", "cut")


@dataclass
class Pair:
    id: str
    book: str
    kind: str  # "insert" | "cut"
    question: str
    answers: list[str]  # gold strings on the side that states the answer
    says: str  # the text that states it: "original" | "augmented"
    silent: str  # the text that does not: "original" | "cut"
    qtype: str = "fact"
    source: str = ""  # "written" | "graphrag"
    cut_sentences: list[str] = field(default_factory=list)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


# --------------------------------------------------------------------------------------------
# Insert pairs


def insert_pairs(book: str, qa_path: Path, inserts_path: Path, out: Path, book_file: Path, tools: Path) -> list[Pair]:
    """Run the insert tool (it checks anchors, answers and absence checks, and writes the
    augmented book); the pairs are the questions it paired."""
    work = out / "insert-qa"
    work.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, str(tools / "insert-qa"), str(qa_path), str(inserts_path), str(work),
                           "--book", str(book_file)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"insert-qa failed for {book}:\n{done.stdout}{done.stderr}")
    augmented = next(work.glob("*.augmented.txt"))
    write_side(out.parent, book, "augmented", augmented.read_text(encoding="utf-8"))
    pairs = []
    for row in read_jsonl(work / "augmented.qa.jsonl"):
        pairs.append(Pair(id=row["id"].removesuffix("-ins"), book=book, kind="insert", question=row["question"],
                          answers=list(row["answers"]), says="augmented", silent="original", source="written"))
    return pairs


# --------------------------------------------------------------------------------------------
# Cut pairs


def _alias_pattern(alias: str) -> re.Pattern:
    return re.compile(r"(?<![\w])" + re.escape(" ".join(alias.split())).replace(r"\ ", r"\s+") + r"(?![\w])", re.I)


def usable_answer(alias: str) -> bool:
    words = alias.split()
    return len(alias.strip()) >= MIN_ANSWER_CHARS and 0 < len(words) <= MAX_ANSWER_WORDS


def _collapse(text: str) -> str:
    return " ".join(text.split())


def cut_candidates(book: str, data_dir: Path) -> list[dict]:
    """Fact questions of the book with short gold strings: the written set's answerable fact
    questions (answers and aliases, verbatim evidence) and GraphRAG-Bench's Fact Retrieval ones."""
    from .books import load_questions
    from .qa_sets import qa_file

    out = []
    path = qa_file(data_dir, book)
    if path.is_file():
        for row in read_jsonl(path):
            if row.get("answerable") and row.get("type") == "fact":
                out.append({"id": row["id"], "question": row["question"], "answers": row["answers"],
                            "evidence": row.get("evidence", []), "source": "written"})
    for row in load_questions(data_dir).get(book, []):
        if row.get("question_type") == "Fact Retrieval":
            out.append({"id": f"gb-{row['id']}", "question": row["question"], "answers": [row["answer"]],
                        "evidence": [], "source": "graphrag"})
    return out


def cut_pairs(book: str, text: str, candidates: list[dict],
              dropped: Counter | None = None) -> tuple[list[Pair], str]:
    """The cut questions of a book and the cut text: for each candidate, the sentences holding
    a gold string or overlapping a verbatim evidence quote; kept when they are few, the book's
    cut stays small, and no gold string is left in the cut text. Why each other candidate was
    not cut is counted in `dropped`."""
    dropped = Counter() if dropped is None else dropped
    spans = split_sentences(text)
    flat = [_collapse(text[s:e]) for s, e in spans]
    budget = int(MAX_CUT_SHARE * len(spans))
    chosen: list[tuple[dict, set[int]]] = []
    taken: set[int] = set()
    for cand in candidates:
        aliases = [a for a in cand["answers"] if usable_answer(a)]
        if not aliases or len(aliases) != len(cand["answers"]):
            dropped["a gold string too long or empty to check"] += 1
            continue  # a long or empty gold string cannot be checked for absence
        patterns = [_alias_pattern(a) for a in aliases]
        holding = {i for i, s in enumerate(flat) if any(p.search(s) for p in patterns)}
        if not holding:
            dropped["no gold string verbatim in the book"] += 1
            continue  # the book does not hold the gold string verbatim: nothing to check
        for quote in cand.get("evidence", []):
            q = _collapse(quote)
            holding |= {i for i, s in enumerate(flat) if s and (s in q or q in s)}
        if len(holding) > MAX_CUT_SENTENCES or len(taken | holding) > budget:
            dropped[f"restated (over {MAX_CUT_SENTENCES} sentences)" if len(holding) > MAX_CUT_SENTENCES
                    else f"over the book's cut budget ({MAX_CUT_SHARE:.0%} of its sentences)"] += 1
            continue
        chosen.append((cand, holding))
        taken |= holding
    cut_text = remove_sentences(text, [spans[i] for i in sorted(taken)])
    pairs = []
    for cand, holding in chosen:
        if any(_alias_pattern(a).search(cut_text) for a in cand["answers"]):
            dropped["a gold string survives the cut"] += 1
            continue  # a gold string survives (across a sentence border, say): not really gone
        pairs.append(Pair(id=cand["id"], book=book, kind="cut", question=cand["question"], answers=list(cand["answers"]),
                          says="original", silent="cut", source=cand["source"],
                          cut_sentences=[flat[i] for i in sorted(holding)]))
    return pairs, cut_text


def remove_sentences(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` without the given sentence spans (the space after each goes too)."""
    out, at = [], 0
    for s, e in sorted(spans):
        out.append(text[at:s])
        at = e
        while at < len(text) and text[at] == " ":
            at += 1
    out.append(text[at:])
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Reading pairs back


def read_pairs(pairs_dir: Path, books=None) -> list[Pair]:
    """Every pair under PAIRS/<book>/pairs.jsonl (optionally only `books`)."""
    out = []
    for path in sorted(Path(pairs_dir).glob("*/pairs.jsonl")):
        if books is None or path.parent.name in books:
            out += [Pair(**row) for row in read_jsonl(path)]
    return out


def side_text_path(pairs_dir: Path, book: str, side: str) -> Path:
    """The side's text, named as the book so that every side's repository has the same doc id."""
    return Path(pairs_dir) / book / side / f"{book}.txt"


def write_side(pairs_dir: Path, book: str, side: str, text: str) -> None:
    path = side_text_path(pairs_dir, book, side)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_book(book: str, out: Path, data_dir: Path, *, book_file: Path, qa_path: Path | None = None,
              inserts_path: Path | None = None, cut: bool = True, dropped: Counter | None = None) -> list[Pair]:
    """Write PAIRS/<book>/: pairs.jsonl and the sides' texts (`out` is PAIRS/<book>)."""
    out.mkdir(parents=True, exist_ok=True)
    original = book_file.read_text(encoding="utf-8")
    write_side(out.parent, book, "original", original)
    pairs: list[Pair] = []
    if inserts_path is not None and inserts_path.is_file():
        pairs += insert_pairs(book, qa_path, inserts_path, out, book_file, data_dir.parent / "tools")
    if cut:
        cut_list, cut_text = cut_pairs(book, original, cut_candidates(book, data_dir), dropped)
        write_side(out.parent, book, "cut", cut_text)
        pairs += cut_list
    write_jsonl(out / "pairs.jsonl", [asdict(p) for p in pairs])
    return pairs


def main(argv: list[str] | None = None) -> int:
    from .books import TEST_BOOKS, TRAIN_BOOKS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--books", default="train", help="train, test, or comma-separated book ids")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=None, help="PAGERAG_DATA_DIR (default: the setting)")
    ap.add_argument("--cut-only", action="store_true", help="no insert pairs (books without written inserts)")
    ap.add_argument("--inserts", type=Path, default=None,
                    help="folder of <book>.qa.jsonl and <book>.insert.jsonl (default: the data's qa/train); "
                         "a book without them gets cut pairs only")
    args = ap.parse_args(argv)
    import os

    data = args.data or Path(os.environ.get("PAGERAG_DATA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "data")
    books = {"train": TRAIN_BOOKS, "test": TEST_BOOKS}.get(args.books) or tuple(args.books.split(","))
    folder = args.inserts or data / "qa" / "train"
    for book in books:
        qa = folder / f"{book}.qa.jsonl"
        inserts = None if args.cut_only else folder / f"{book}.insert.jsonl"
        dropped: Counter = Counter()
        pairs = make_book(book, args.out / book, data, book_file=data / "graphrag-bench-novel" / "texts" / f"{book}.txt",
                          qa_path=qa, inserts_path=inserts, dropped=dropped)
        kinds = {k: sum(p.kind == k for p in pairs) for k in ("insert", "cut")}
        why = ", ".join(f"{reason} {n}" for reason, n in dropped.most_common())
        print(f"{book}: {kinds['insert']} insert pairs, {kinds['cut']} cut pairs"
              + (f" (cut candidates not kept: {why})" if why else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
