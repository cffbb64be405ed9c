"""The web page shows a citation's page and section beside it, and in the title of the passage
it opens (real headless Chromium, a real server): for a citation made from evidence the server
retrieved, and for a real answer about the training-book excerpt (printer_repo's text) built
from a PDF — whose screenshot is the README's picture when PAGERAG_SCREENSHOT names a path."""
from __future__ import annotations

import os
import re

import httpx
import pytest
from serving import ANSWER, ANSWERABLE, ThreadServer
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


# The excerpt is one line of text; as a book it has three parts, each opening with a heading the
# text carries in capitals. The PDF makes them chapters of paragraphs of six sentences.
PARTS = ("THE FIVE MILLION LOAN ELECTION.", "THE GREAT SIOUX OUTBREAK IN 1862.")


def printer_blocks(text: str) -> list:
    cuts = [0, *(text.index(heading) for heading in PARTS), len(text)]
    blocks = []
    for n, (start, end) in enumerate(zip(cuts, cuts[1:]), 1):
        blocks.append(("h", 1, f"CHAPTER {'I' * n}"))
        sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z\"])", text[start:end].strip())
        blocks += [("p", " ".join(sentences[i : i + 6])) for i in range(0, len(sentences), 6)]
    return blocks


@pytest.fixture(scope="module")
def printer_pdf(printer_excerpt, tmp_path_factory):
    """The training-book excerpt as a PDF (A4, a bookmark per chapter), built and served."""
    from helpers.documents import write_pdf
    from pagerag.build import build_repository
    from pagerag.serve.config import ServeConfig
    from pagerag.settings import load_settings

    folder = tmp_path_factory.mktemp("printer-pdf")
    pdf = write_pdf(folder / "printer.pdf", printer_blocks(printer_excerpt.read_text(encoding="utf-8")),
                    title="Reminiscences of a St. Paul printer", page_size="A4")
    repo = folder / "printer.rag"
    build_repository([pdf], repo, load_settings(environ={}), show_progress=False)
    config = ServeConfig(repos={"printer": repo}, llm="extractive", warm=False).check()
    with ThreadServer(config) as server:
        yield server


def test_a_real_answer_cites_page_and_section(browser, printer_pdf, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    browser.get(printer_pdf.url + "/")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#repo option"))
    _ask(browser, ANSWERABLE)
    assert ANSWER in browser.find_element(By.ID, "answer").text
    first = browser.find_element(By.CSS_SELECTOR, "#citations li").text
    assert first.startswith("[1] printer.pdf, p. ") and ", CHAPTER I: \u201c" in first, first
    _ask(browser, RELATIONAL)  # the README's picture: a citation opened, the paths behind the answer
    cites = browser.find_elements(By.CSS_SELECTOR, "#answer a.cite")
    if cites:
        cites[0].click()
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#passage-text mark"), 60)
        assert ", p. " in browser.find_element(By.ID, "passage-title").text
    _screenshot(browser, tmp_path / "pdf-answer.png", os.environ.get("PAGERAG_SCREENSHOT"))
