"""A repository built from a PDF, an EPUB, a Word file and a web page: the structure maps are
stored, and every passage, piece of evidence, excerpt and citation says the page and section
where the test put its text. A repository built before structure maps existed still opens."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.documents import FORMAT_CODEWORDS
from pagerag.repository import Repository
from pagerag.validation import validate_repository

pytestmark = pytest.mark.slow
SECTION = ["3 Setup", "3.2 Installing"]


def codeword_passages(repo: Repository, fmt: str):
    return [p for p in repo.passages if f"{fmt} codeword" in p.text]


def test_structure_maps_are_stored_beside_the_text(formats_repo: Path):
    repo = validate_repository(formats_repo)
    sources = {s["doc_id"]: s for s in repo.manifest["sources"]}
    assert {s["format"] for s in sources.values()} == {"pdf", "epub", "docx", "html"}  # cover.png skipped
    for doc_id, source in sources.items():
        stored = json.loads((formats_repo / "sources" / f"{doc_id}.structure.json").read_text())
        assert stored["format"] == source["format"] and stored["file"] == Path(source["path"]).name
        assert source["sections"] == 3 and len(stored["headings"]) == 3
    assert sources["manual"]["pages"] >= 3


def test_passages_carry_page_and_section(formats_repo: Path):
    repo = Repository.open(formats_repo)
    pdf_pages = repo.structure("manual").pages
    for fmt in FORMAT_CODEWORDS:
        found = codeword_passages(repo, fmt)
        assert found, fmt
        for p in found:
            assert p.section == SECTION
            assert p.page == (pdf_pages[-1].number if fmt == "pdf" else None)
    intro = next(p for p in repo.passages if "Paragraph 0 of the pdf manual" in p.text)
    assert (intro.page, intro.page_label, intro.section) == (1, "i", ["1 Introduction"])
    breaks = {doc: repo.structure(doc).breaks() for doc in {p.doc_id for p in repo.passages}}
    assert not any(p.start < b < p.end for p in repo.passages for b in breaks[p.doc_id])


def test_retrieved_evidence_and_citations_say_page_and_section(formats_repo: Path):
    from pagerag.api import PageRAG
    from pagerag.generate.context import make_excerpt
    from pagerag.records import Citation, Window
    from pagerag.retrieve.state import get_state

    rag = PageRAG(formats_repo, pipeline="passages-only", llm="extractive")
    try:
        result = rag.retrieve("What is the pdf codeword?")
    finally:
        rag.close()
    evidence = [e for e in result.evidence if "pdf codeword" in e.text]
    assert evidence and evidence[0].section == SECTION and evidence[0].page == Repository.open(formats_repo).structure("manual").pages[-1].number
    as_json = result.to_dict()["evidence"]
    assert {"page", "page_label", "section"} <= set(as_json[0])
    # an excerpt (what the answerer reads) and its citation, cut around the codeword sentence
    state = get_state(formats_repo)
    for fmt, word in FORMAT_CODEWORDS.items():
        p = codeword_passages(state.repo, fmt)[0]
        source = state.source_text(p.doc_id)
        start = source.index("Run the installer", p.start)
        end = source.index(word, start) + len(word) + 1
        window = Window(p.passage_id, p.doc_id, p.file, start, end, source[start:end])
        citation = Citation.of(make_excerpt(state, window, start, end, 1, 1.0)).to_dict()
        assert citation["section"] == SECTION and re.sub(r"\s+", " ", citation["quote"]).endswith(f"is {word}.")
        assert (citation["page"] is not None) == (fmt == "pdf")


def test_a_repository_without_structure_maps_still_opens(formats_repo: Path, tmp_path: Path):
    old = tmp_path / "old.rag"
    shutil.copytree(formats_repo, old)
    for path in (old / "sources").glob("*.structure.json"):
        path.unlink()
    repo = validate_repository(old)
    assert all(p.page is None and p.section == [] for p in repo.passages)
    from pagerag.api import PageRAG

    rag = PageRAG(old, pipeline="passages-only", llm="extractive")
    try:
        evidence = rag.retrieve("What is the epub codeword?").evidence
    finally:
        rag.close()
    assert evidence and all(e.page is None and e.section == [] for e in evidence)


def test_cli_retrieve_shows_where(formats_repo: Path):
    run = subprocess.run([sys.executable, "-m", "pagerag", "retrieve", "What is the docx codeword?", "--repo",
                          str(formats_repo), "--pipeline", "passages-only", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    evidence = json.loads(run.stdout)["evidence"]
    hit = next(e for e in evidence if "docx codeword" in e["text"])
    assert hit["section"] == SECTION and hit["page"] is None
