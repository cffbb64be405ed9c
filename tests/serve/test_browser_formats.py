"""The web page shows a citation's page and section beside it, and in the title of the passage
it opens (real headless Chromium, a real server): for a citation made from evidence the server
retrieved, and for a real answer about the Christmas Carol excerpt built from a PDF — whose
screenshot is the README's picture when PAGERAG_SCREENSHOT names a path."""
from __future__ import annotations

import os

import httpx
import pytest
from serving import ANSWERABLE, ThreadServer
from test_browser import RELATIONAL, _ask, _screenshot, _wait, browser  # noqa: F401  (the browser fixture)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def manuals(formats_repo):
    from pagerag.serve.config import ServeConfig

    config = ServeConfig(repos={"manuals": formats_repo}, llm="extractive", warm=False).check()
    with ThreadServer(config) as server:
        yield server


def _citation(server, fmt: str) -> dict:
    """A citation as `/v1/ask` gives one, made from the evidence `/v1/retrieve` found."""
    evidence = httpx.post(server.url + "/v1/retrieve", json={"question": f"What is the {fmt} codeword?",
                                                             "pipeline": "passages-only"}, timeout=300).json()["evidence"]
    hit = next(e for e in evidence if f"{fmt} codeword" in e["text"])
    start = hit["start"] + hit["text"].index(f"The {fmt} codeword")
    end = hit["start"] + hit["text"].index(".", start - hit["start"]) + 1
    quote = hit["text"][start - hit["start"] : end - hit["start"]]
    return {"n": 1, "passage_id": hit["passage_id"], "file": hit["file"], "doc_id": hit["doc_id"], "start": start,
            "end": end, "quote": quote, "line": 1, "page": hit["page"], "page_label": hit["page_label"],
            "section": hit["section"]}


def test_citations_show_page_and_section(browser, manuals, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    pdf, docx = _citation(manuals, "pdf"), _citation(manuals, "docx")
    docx["n"] = 2
    answer = {"question": "What are the codewords?", "decision": "answered", "reason": None,
              "answer": f"{pdf['quote']} [1] {docx['quote']} [2]", "citations": [pdf, docx], "rcs": None, "tau": None,
              "plan": {}, "analysis": {}, "hints": [], "verdict": None, "tokens": {}, "latency_ms": {}, "notes": [],
              "backend": "extractive", "pipeline": "full"}
    browser.get(manuals.url + "/")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#repo option"))
    browser.execute_script("state.repo = 'manuals'; show(arguments[0]);", answer)
    items = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#citations li")]
    page = pdf["page_label"] or pdf["page"]
    assert items[0].startswith(f"[1] manual.pdf, p. {page}, 3 Setup \u203a 3.2 Installing: \u201cThe pdf codeword")
    assert items[1].startswith("[2] notes.docx, 3 Setup \u203a 3.2 Installing: \u201cThe docx codeword")
    assert "line" not in items[0] + items[1]  # a page and a section say where; a line of extracted text would not

    browser.find_element(By.CSS_SELECTOR, "#answer a.cite").click()
    mark = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#passage-text mark"), 60)[0]
    assert " ".join(mark.text.split()) == " ".join(pdf["quote"].split())
    title = browser.find_element(By.ID, "passage-title").text
    assert title.startswith(f"[1] manual.pdf, p. {page}, 3 Setup \u203a 3.2 Installing (characters")
    _screenshot(browser, tmp_path / "formats.png")


@pytest.fixture(scope="module")
def carol_pdf(carol_excerpt, tmp_path_factory):
    """The Christmas Carol excerpt as a PDF (A4, its lines kept, a bookmark per stave), built and
    served."""
    from helpers.documents import book_blocks, write_pdf
    from pagerag.build import build_repository
    from pagerag.serve.config import ServeConfig
    from pagerag.settings import load_settings

    folder = tmp_path_factory.mktemp("carol-pdf")
    pdf = write_pdf(folder / "christmas_carol.pdf", book_blocks(carol_excerpt.read_text(encoding="utf-8")),
                    title="A Christmas Carol", page_size="A4")
    repo = folder / "carol.rag"
    build_repository([pdf], repo, load_settings(environ={}), show_progress=False)
    config = ServeConfig(repos={"carol": repo}, llm="extractive", warm=False).check()
    with ThreadServer(config) as server:
        yield server


def test_a_real_answer_cites_page_and_section(browser, carol_pdf, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    browser.get(carol_pdf.url + "/")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#repo option"))
    _ask(browser, ANSWERABLE)
    assert "fifteen shillings" in browser.find_element(By.ID, "answer").text
    first = browser.find_element(By.CSS_SELECTOR, "#citations li").text
    assert first.startswith("[1] christmas_carol.pdf, p. ") and ", STAVE ONE: \u201c" in first, first
    _ask(browser, RELATIONAL)  # the README's picture: a citation opened, the paths behind the answer
    cites = browser.find_elements(By.CSS_SELECTOR, "#answer a.cite")
    if cites:
        cites[0].click()
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#passage-text mark"), 60)
        assert ", p. " in browser.find_element(By.ID, "passage-title").text
    _screenshot(browser, tmp_path / "pdf-answer.png", os.environ.get("PAGERAG_SCREENSHOT"))
