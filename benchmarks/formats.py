"""The same book as .txt, .epub, .pdf and .docx: the same passages, the same answers, and
citations that say page and section.

    python benchmarks/formats.py                         # A Christmas Carol and its DEV questions
    python benchmarks/formats.py --no-eval               # passages only (no decision models needed)
    python benchmarks/formats.py --book BOOK.txt --qa QA.jsonl --work /tmp/fmt --json out.json

From the text book (default $PAGERAG_DATA_DIR/books/christmas_carol.txt, Gutenberg header and
licence included: every loader must strip them) it makes an EPUB (ebooklib: one chapter per
chapter heading, a nested table of contents), a PDF (reportlab: A4, a running head and page
numbers, one bookmark per chapter) and a Word file (python-docx: chapter headings as Heading 1).
A chapter heading is a paragraph that is only "STAVE ONE", "CHAPTER IV", "Book 2", …; every other
paragraph is written as one paragraph that keeps the text's own line breaks (<br/>, a Word line
break, a PDF line), so the files say exactly what the text says and the passages can be compared
one to one. The writers are the test extra's (pip install -e '.[test]').

Each file is built (`pagerag build`, a process each) into WORK/<stem>-<format>.rag. Then:
- passages: each format's against the text's, as whitespace-folded text in order: how many are
  identical, and where the others are: at a chapter start (a passage never runs across one, and
  the text has no chapters), at a PDF page break (where a paragraph's end is a guess), at lines
  the .txt indents (spaces no other format keeps change the token count, so the windows differ
  until they line up again), or elsewhere;
- the body text: identical up to whitespace or not;
- answers (unless --no-eval): `pagerag eval QA --repo R` for each repository (pipeline full,
  --llm extractive by default), compared question by question with the text's: the same
  decision, the same answer text and the same refusal reason; and the share of the citations
  that carry a section (EPUB, PDF, Word) and a page (PDF).
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the writers: tests/helpers/documents.py

FORMATS = ("txt", "epub", "pdf", "docx")


def data_dir() -> Path:
    return Path(os.environ.get("PAGERAG_DATA_DIR", ROOT.parent / "shared" / "data"))


# --------------------------------------------------------------------------------------------
# Making the files


def make_files(book: Path, work: Path, formats: list[str]) -> dict[str, Path]:
    from helpers.documents import book_blocks, write_docx, write_epub, write_pdf

    text = book.read_text(encoding="utf-8-sig")
    blocks = book_blocks(text)
    title = book.stem.replace("_", " ").title()
    files = {}
    for fmt in formats:
        path = work / f"{book.stem}.{fmt}"
        if fmt == "txt":
            path.write_bytes(book.read_bytes())
        elif fmt == "epub":
            write_epub(path, blocks, title=title)
        elif fmt == "pdf":
            write_pdf(path, blocks, title=title, page_size="A4")
        elif fmt == "docx":
            write_docx(path, blocks)
        files[fmt] = path
    chapters = sum(1 for b in blocks if b[0] == "h")
    print(f"made {', '.join(p.name for p in files.values())} from {book.name} ({chapters} chapter headings)")
    return files


def build(path: Path, repo: Path) -> float:
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "pagerag", "build", str(path), "--repo", str(repo), "-q"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"build of {path.name} failed: {run.stderr.strip()}")
    return time.perf_counter() - started


# --------------------------------------------------------------------------------------------
# Passages


def fold(text: str) -> str:
    return " ".join(text.split())


def compare_passages(reference, other) -> dict:
    """`other`'s passages against `reference`'s (Repository objects), in order."""
    ref = [fold(p.text) for p in reference.passages]
    got = [fold(p.text) for p in other.passages]
    matcher = difflib.SequenceMatcher(None, ref, got, autojunk=False)
    same = {j + k for _, j, n in matcher.get_matching_blocks() for k in range(n)}
    where = {"chapter start": 0, "page break": 0, "indented lines": 0, "elsewhere": 0}
    examples = []
    ref_text = reference.source_text(reference.passages[0].doc_id)
    for j, p in enumerate(other.passages):
        if j in same:
            continue
        structure = other.structure(p.doc_id)
        if any(abs(p.start - b) < 400 or abs(p.end - b) < 400 for b in structure.breaks()):
            kind = "chapter start"
        elif structure.pages and any(p.start - 400 < page.start < p.end for page in structure.pages):
            kind = "page break"
        elif _after_indented_lines(ref_text, p.text):
            kind = "indented lines"
        else:
            kind = "elsewhere"
        where[kind] += 1
        if kind == "elsewhere" and len(examples) < 3:
            examples.append(f"{p.passage_id}: {fold(p.text)[:90]}…")
    return {"reference": len(ref), "passages": len(got), "identical": len(same), "differ": where, "examples": examples}


def _after_indented_lines(text: str, passage: str) -> bool:
    """Whether the .txt indents lines (spaces no other format keeps: they change the token count)
    in or shortly before where it says what `passage` says."""
    words = passage.split()[:6]
    found = re.search(r"\s+".join(map(re.escape, words)), text)
    return found is not None and "\n  " in text[max(0, found.start() - 1500) : found.start() + len(passage) + 200]


def same_body(reference, other) -> bool | str:
    """Whether the two bodies (Gutenberg header and licence cut) say the same words."""
    def body(repo):
        source = repo.manifest["sources"][0]
        return repo.source_text(source["doc_id"])[source["content_start"] : source["content_end"]]

    a, b = fold(body(reference)), fold(body(other))
    if a == b:
        return True
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"differ at character {at}: «{a[max(0, at - 30):at + 30]}» vs «{b[max(0, at - 30):at + 30]}»"


# --------------------------------------------------------------------------------------------
# Answers


def evaluate(qa: Path, repo: Path, out: Path, pipeline: str, llm: str) -> dict | str:
    run = subprocess.run([sys.executable, "-m", "pagerag", "eval", str(qa), "--repo", str(repo), "--pipeline", pipeline,
                          "--llm", llm, "--out", str(out), "-q"], capture_output=True, text=True)
    if run.returncode != 0:
        return (run.stderr.strip().splitlines() or ["failed"])[-1]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    return {row["id"]: row for row in rows}


def compare_answers(reference: dict, other: dict) -> dict:
    ids = sorted(reference)
    decision = sum(other.get(i, {}).get("decision") == reference[i]["decision"] for i in ids)
    answer = sum(fold(other.get(i, {}).get("answer", "")) == fold(reference[i]["answer"]) for i in ids)
    reason = sum(other.get(i, {}).get("reason") == reference[i]["reason"] for i in ids)
    citations = [c for row in other.values() for c in row.get("citations", [])]
    disagree = [i for i in ids if other.get(i, {}).get("decision") != reference[i]["decision"]]
    return {
        "questions": len(ids), "same_decision": decision, "same_answer": answer, "same_reason": reason,
        "answered": sum(row["decision"] == "answered" for row in other.values()),
        "citations": len(citations),
        "with_section": sum(bool(c.get("section")) for c in citations),
        "with_page": sum(c.get("page") is not None for c in citations),
        "disagree": disagree[:10],
        "example": next((f"{c.get('file')}, p. {c.get('page_label') or c.get('page')}, {' › '.join(c.get('section') or [])}"
                         for c in citations if c.get("page") is not None or c.get("section")), None),
    }


# --------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--book", type=Path, default=data_dir() / "books" / "christmas_carol.txt")
    parser.add_argument("--qa", type=Path, default=data_dir() / "qa" / "christmas_carol.qa.jsonl")
    parser.add_argument("--work", type=Path, default=Path("/tmp/pagerag-formats"))
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--pipeline", default="full")
    parser.add_argument("--llm", default="extractive")
    parser.add_argument("--no-eval", action="store_true", help="compare passages only")
    parser.add_argument("--rebuild", action="store_true", help="rebuild repositories that exist")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    if "txt" not in args.formats:
        args.formats.insert(0, "txt")  # the reference
    from pagerag.repository import Repository

    args.work.mkdir(parents=True, exist_ok=True)
    files = make_files(args.book, args.work, args.formats)
    repos, report = {}, {"book": args.book.name, "formats": {}}
    for fmt, path in files.items():
        repo = args.work / f"{args.book.stem}-{fmt}.rag"
        seconds = build(path, repo) if args.rebuild or not (repo / "manifest.json").is_file() else None
        repos[fmt] = Repository.open(repo)
        pages = repos[fmt].structure(repos[fmt].manifest["sources"][0]["doc_id"]).pages
        print(f"{fmt:>4}: {repo.name}: {len(repos[fmt].passages)} passages, {len(pages)} pages"
              + (f", built in {seconds:.0f} s" if seconds else " (built before)"))
    reference = repos["txt"]
    print("\npassages against the .txt's (whitespace folded, in order):")
    for fmt in args.formats[1:]:
        figures = compare_passages(reference, repos[fmt])
        figures["same_body"] = same_body(reference, repos[fmt])
        report["formats"][fmt] = {"passages": figures}
        d = figures["differ"]
        print(f"{fmt:>4}: {figures['identical']}/{figures['passages']} identical (txt {figures['reference']}); "
              f"differing: {d['chapter start']} at a chapter start, {d['page break']} at a page break, "
              f"{d['indented lines']} at lines the .txt indents, {d['elsewhere']} elsewhere; "
              f"body text identical up to whitespace: {figures['same_body']}")
        for example in figures["examples"]:
            print(f"        {example}")
    if args.no_eval:
        _write(args.json, report)
        return
    print(f"\nanswers on {args.qa.name} (pipeline {args.pipeline}, --llm {args.llm}) against the .txt's:")
    results = {fmt: evaluate(args.qa, args.work / f"{args.book.stem}-{fmt}.rag", args.work / f"eval-{fmt}",
                             args.pipeline, args.llm) for fmt in args.formats}
    if isinstance(results["txt"], str):
        print(f"  eval of the .txt repository failed: {results['txt']}")
        _write(args.json, report)
        raise SystemExit(1)
    print(f"   txt: {sum(r['decision'] == 'answered' for r in results['txt'].values())}/{len(results['txt'])} answered")
    for fmt in args.formats[1:]:
        if isinstance(results[fmt], str):
            print(f"  {fmt}: eval failed: {results[fmt]}")
            continue
        figures = compare_answers(results["txt"], results[fmt])
        report["formats"][fmt]["answers"] = figures
        print(f"{fmt:>4}: same decision {figures['same_decision']}/{figures['questions']}, same answer "
              f"{figures['same_answer']}, same reason {figures['same_reason']}; {figures['citations']} citations, "
              f"{figures['with_section']} with a section, {figures['with_page']} with a page"
              + (f"; disagree on {', '.join(figures['disagree'])}" if figures["disagree"] else ""))
        if figures["example"]:
            print(f"        e.g. {figures['example']}")
    _write(args.json, report)


def _write(path: Path | None, report: dict) -> None:
    if path is not None:
        path.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
