"""The web page shows a citation's page and section beside it, and in the title of the passage
it opens (real headless Chromium, a real server; the citation is one the server retrieved)."""
from __future__ import annotations

import httpx
import pytest
from serving import ThreadServer
from test_browser import _screenshot, _wait, browser  # noqa: F401  (the browser fixture)

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
