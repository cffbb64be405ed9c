"""The API names where a cited passage lies in a PDF, EPUB, Word file or web page — its page and
section, beside the file name (never a server path) — and builds from uploads of those formats."""
from __future__ import annotations

import time

import httpx
import pytest
from serving import ThreadServer

pytestmark = pytest.mark.slow
SECTION = ["3 Setup", "3.2 Installing"]


@pytest.fixture(scope="module")
def server(formats_repo, tmp_path_factory):
    from pagerag.serve.config import ServeConfig

    repos = tmp_path_factory.mktemp("format-builds")
    config = ServeConfig(repos={"manuals": formats_repo}, repos_dir=repos, llm="extractive", warm=False).check()
    with ThreadServer(config) as running:
        yield running


def retrieve(url: str, question: str, repo: str = "manuals") -> dict:
    response = httpx.post(url + "/v1/retrieve", json={"question": question, "repo": repo, "pipeline": "passages-only"},
                          timeout=300)
    assert response.status_code == 200, response.text
    return response.json()


def test_repositories_list_their_documents_formats(server):
    [entry] = [r for r in httpx.get(server.url + "/v1/repos", timeout=30).json()["repos"] if r["name"] == "manuals"]
    assert {(s["file"], s["format"]) for s in entry["sources"]} == {
        ("manual.pdf", "pdf"), ("guide.epub", "epub"), ("notes.docx", "docx"), ("page.html", "html")}


def test_retrieved_evidence_names_page_and_section(server):
    evidence = retrieve(server.url, "What is the pdf codeword?")["evidence"]
    hit = next(e for e in evidence if "pdf codeword" in e["text"])
    assert hit["file"] == "manual.pdf" and hit["section"] == SECTION and hit["page"] >= 3
    assert hit["page_label"] == str(hit["page"] - 2)  # the PDF numbers its pages i, ii, 1, 2, …
    html = next(e for e in retrieve(server.url, "What is the html codeword?")["evidence"] if "html codeword" in e["text"])
    assert html["file"] == "page.html" and html["section"] == SECTION and html["page"] is None


def test_the_passage_endpoint_says_page_and_section(server):
    hit = next(e for e in retrieve(server.url, "What is the pdf codeword?")["evidence"] if "pdf codeword" in e["text"])
    start = hit["start"] + hit["text"].index("The pdf codeword")
    context = httpx.get(f"{server.url}/v1/repos/manuals/passages/{hit['passage_id']}",
                        params={"start": start, "end": start + 16}, timeout=30).json()
    assert context["quote"] == "The pdf codeword" and context["file"] == "manual.pdf"
    assert (context["page"], context["page_label"], context["section"]) == (hit["page"], hit["page_label"], SECTION)


def test_an_uploaded_epub_is_built_with_its_sections(server, formats_folder):
    data = (formats_folder / "guide.epub").read_bytes()
    response = httpx.post(server.url + "/v1/builds", data={"repo": "guide"},
                          files={"files": ("guide.epub", data, "application/epub+zip")}, timeout=60)
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    deadline = time.monotonic() + 900
    while (job := httpx.get(f"{server.url}/v1/builds/{job_id}", timeout=30).json())["status"] not in ("done", "failed"):
        assert time.monotonic() < deadline, job
        time.sleep(0.5)
    assert job["status"] == "done", job
    hit = next(e for e in retrieve(server.url, "What is the epub codeword?", "guide")["evidence"] if "epub codeword" in e["text"])
    assert hit["file"] == "guide.epub" and hit["section"] == SECTION


def test_uploads_must_be_what_their_names_say(server):
    def refused(name: str, data: bytes) -> str:
        response = httpx.post(server.url + "/v1/builds", data={"repo": "nope"}, files={"files": (name, data)}, timeout=60)
        assert response.status_code == 415, response.text
        return response.json()["error"]["message"]

    assert "'book.pdf' is not a PDF" in refused("book.pdf", b"MZ\x90\x00 a program")
    assert "'book.epub' is not an EPUB" in refused("book.epub", b"%PDF-1.7")
    assert "'book.docx' is not a Word file" in refused("book.docx", b"\xd0\xcf\x11\xe0 an old .doc")
    assert "'book.rtf' is not a supported file" in refused("book.rtf", b"{\\rtf1}")
