"""The web page in a real headless Chromium (Debian's `chromium` and `chromium-driver`): load,
ask, open a citation and find the highlighted quote in its surrounding text, see a refusal's
reason, build a repository from an upload with a live progress bar. Saves screenshots (the
README's docs/serve.png when PAGERAG_SCREENSHOT names a path)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import httpx
import pytest
from serving import ANSWER, ANSWERABLE, EXCERPT_FILE, REPO, UNANSWERABLE, UNANSWERABLE_SUBJECT, ThreadServer

# a relational question about two people of the served excerpt, and the graph names the page
# must draw for them (not a DEV question: its answer is not what the test checks)
RELATIONAL = "How was Dr. Foster connected to Newson?"
RELATIONAL_NAMES = {"Dr. Foster", "Newson"}

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1500"]


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("no browser: install Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra: pip install -e '.[test]'")
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="pagerag-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # every request the pages make
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(driver, condition, timeout=180):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # The page re-renders lists (the repository menu refreshes after a build): an element found
    # in one poll may be gone by the time it is read, so that poll is retried, not failed.
    wait = WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,))
    return wait.until(condition)


def _ask(driver, question: str) -> None:
    from selenium.webdriver.common.by import By

    status = driver.find_element(By.ID, "status")
    box = driver.find_element(By.ID, "question")
    box.clear()
    box.send_keys(question)
    previous = status.text
    driver.find_element(By.ID, "ask").click()
    _wait(driver, lambda d: status.text != previous and status.text != "Thinking…")
    assert "error" not in (status.get_attribute("class") or ""), status.text


def test_page_asks_opens_a_citation_and_shows_a_refusal(browser, served, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(served.url + "/")
    _wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#repo option")) >= 2)
    Select(browser.find_element(By.ID, "repo")).select_by_value(REPO)
    assert not browser.find_element(By.ID, "keybox").is_displayed()  # no key needed on loopback

    _ask(browser, ANSWERABLE)
    assert browser.find_element(By.ID, "answer-box").is_displayed()
    assert ANSWER in browser.find_element(By.ID, "answer").text
    # offline, what the reader found is shown as the closest passage, with why it is not an answer
    assert browser.find_element(By.ID, "answer-title").text == "Closest passage"
    assert "cannot check" in browser.find_element(By.ID, "caveat").text
    assert "need:" in browser.find_element(By.ID, "route-need").text
    assert browser.find_elements(By.CSS_SELECTOR, "#route .share")  # operators and budget shares
    assert "judge (model): sufficient" in browser.find_element(By.ID, "verdict").text
    assert browser.find_element(By.ID, "rcs").text.startswith("RCS")
    stages = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "#costs tbody tr")]
    assert any(s.startswith("retrieve") for s in stages) and stages[-1].startswith("total")
    assert browser.find_elements(By.CSS_SELECTOR, "#graph circle")  # the linked entities, drawn

    browser.find_element(By.CSS_SELECTOR, "#answer a.cite").click()
    mark = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#passage-text mark"), 60)[0]
    citation = httpx.post(served.url + "/v1/ask", json={"question": ANSWERABLE, "repo": REPO}, timeout=120).json()["citations"][0]
    assert " ".join(mark.text.split()) == " ".join(citation["quote"].split())
    title = browser.find_element(By.ID, "passage-title").text
    assert f"line {citation['line']}" in title and EXCERPT_FILE in title
    surrounding = browser.find_element(By.ID, "passage-text").text
    assert len(surrounding) > len(mark.text) + 200  # the quote sits in its surrounding text
    _screenshot(browser, tmp_path / "answer.png")
    browser.find_element(By.ID, "passage-close").click()

    _ask(browser, UNANSWERABLE)  # the default offline: a closest passage, labelled, not a refusal
    assert browser.find_element(By.ID, "answer-box").is_displayed()
    assert browser.find_element(By.ID, "answer-title").text == "Closest passage"
    pipeline = Select(browser.find_element(By.ID, "pipeline"))
    pipeline.select_by_value("reader-decides")  # the reader's model may refuse
    _ask(browser, UNANSWERABLE)
    assert browser.find_element(By.ID, "refusal-box").is_displayed()
    assert not browser.find_element(By.ID, "answer-box").is_displayed()
    assert browser.find_element(By.ID, "reason").text == "insufficient_evidence"
    assert UNANSWERABLE_SUBJECT in browser.find_element(By.ID, "refusal").text
    _screenshot(browser, tmp_path / "refusal.png")
    pipeline.select_by_value("")

    # a relational question: the paths behind the answer are drawn as a graph (the README's picture)
    _ask(browser, RELATIONAL)
    hints = browser.execute_script("return state.lastAnswer.hints")
    paths = [h for h in hints if h["kind"] == "path"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#graph line.edge")) >= len(paths) > 0
    assert RELATIONAL_NAMES <= {t.text for t in browser.find_elements(By.CSS_SELECTOR, "#graph g.node text")}
    cites = browser.find_elements(By.CSS_SELECTOR, "#answer a.cite")
    if cites:
        cites[0].click()
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#passage-text mark"), 60)
    assert _overlapping_labels(browser) == []
    _screenshot(browser, tmp_path / "paths.png", os.environ.get("PAGERAG_SCREENSHOT"))
    page = browser.execute_script("return document.body.innerText + JSON.stringify(state.lastAnswer)")
    assert str(served.repos_dir.parent) not in page and f"/{EXCERPT_FILE}" not in page  # names, never server paths


# a crowded answer: a hub with many neighbours, long names and long relation labels
CROWDED = {
    "analysis": {"links": [{"name": "Ebenezer Scrooge"}, {"name": "Jacob Marley"}]},
    "hints": [{"kind": "path", "text": f"Ebenezer Scrooge —[{rel}]→ {other}"} for rel, other in [
        ("was the business partner of", "Jacob Marley"), ("employs as his clerk", "Bob Cratchit"),
        ("is the uncle of", "Fred the nephew"), ("is visited by", "Keeper of Northern Light"),
        ("is visited by", "Warden of the Eastern Gate"), ("is visited by", "Lady of the Long Table Yet"),
        ("was apprenticed to", "Old Fezziwig"), ("was engaged to", "Belle"), ("refuses to give to", "the portly gentlemen"),
        ("buys the prize turkey for", "the Cratchit family"), ("hears the story of", "Tiny Tim")]]
    + [{"kind": "path", "text": "Jacob Marley —[wears the chain he forged in]→ Life ←[is haunted by]— Ebenezer Scrooge"}],
}


def _overlapping_labels(driver) -> list:
    """Pairs of graph labels (drawn text) whose boxes intersect."""
    return driver.execute_script("""
        const boxes = [...document.querySelectorAll('#graph text')].filter((t) => t.getBBox().width > 0)
          .map((t) => ({text: t.textContent, box: t.getBBox()}));
        const hit = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
        const pairs = [];
        boxes.forEach((a, i) => boxes.slice(i + 1).forEach((b) => { if (hit(a.box, b.box)) pairs.push([a.text, b.text]); }));
        return pairs;""")


def test_graph_labels_do_not_overlap_even_when_crowded(browser, served):
    from selenium.webdriver.common.by import By

    browser.get(served.url + "/")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#repo option"))
    browser.execute_script("document.getElementById('result').hidden = false; drawGraph(arguments[0]);", CROWDED)
    names = {t.text for t in browser.find_elements(By.CSS_SELECTOR, "#graph g.node text")}
    assert len(names) == 13 and "Jacob Marley" in names  # every node keeps its name
    assert _overlapping_labels(browser) == []
    assert browser.find_elements(By.CSS_SELECTOR, "#graph text.edge-label")  # relation labels that fit are shown


@pytest.fixture(scope="module")
def keyed(printer_repo):
    from pagerag.serve.config import ServeConfig

    config = ServeConfig(repos={REPO: printer_repo}, api_key="browser-key-0123456789", llm="extractive",
                         warm=False).check()
    with ThreadServer(config) as server:
        yield server


def test_with_a_key_the_page_points_to_its_key_box(browser, keyed):
    from selenium.webdriver.common.by import By

    browser.get(keyed.url + "/")
    status = browser.find_element(By.ID, "status")
    _wait(browser, lambda d: status.text, 60)
    box = browser.find_element(By.ID, "keybox")
    assert box.is_displayed() and "API key" in box.text
    assert "API key" in status.text and "box at the top of the page" in status.text, status.text
    assert "Authorization" not in status.text  # what a client library needs, not a person
    assert browser.switch_to.active_element.get_attribute("id") == "apikey"

    browser.find_element(By.ID, "apikey").send_keys("wrong-key-0123456789")
    browser.find_element(By.ID, "savekey").click()
    _wait(browser, lambda d: "refused" in status.text, 60)
    assert box.is_displayed()
    key = browser.find_element(By.ID, "apikey")
    key.clear()
    key.send_keys("browser-key-0123456789")
    browser.find_element(By.ID, "savekey").click()
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#repo option"), 60)
    assert not box.is_displayed() and status.text == ""
    _ask(browser, ANSWERABLE)
    assert ANSWER in browser.find_element(By.ID, "answer").text


def test_page_builds_an_upload_with_a_live_progress_bar(browser, served, tmp_path):
    from selenium.webdriver.common.by import By

    book = tmp_path / "note.txt"
    book.write_text("Mr. Fezziwig kept a warehouse in the city of London.\n\n"
                    "Every Christmas Eve Mr. Fezziwig gave a ball for his apprentices, Ebenezer and Dick Wilkins.\n\n"
                    "Mrs. Fezziwig danced with Mr. Fezziwig, and the fiddler played until eleven o'clock.\n", encoding="utf-8")
    browser.get(served.url + "/")
    browser.find_element(By.ID, "build-name").send_keys("fezziwig")
    browser.find_element(By.ID, "build-files").send_keys(str(book))
    browser.find_element(By.ID, "build-start").click()
    bar = browser.find_element(By.ID, "build-bar")
    seen = set()

    def finished(driver):
        seen.add(round(float(bar.get_attribute("value") or 0), 3))
        return driver.find_element(By.ID, "build-status").text.startswith(("Built", "Build failed"))

    _wait(browser, finished, 300)
    status = browser.find_element(By.ID, "build-status").text
    assert status.startswith("Built"), status
    assert float(bar.get_attribute("value")) == 1.0 and len(seen) > 2  # the bar moved on the way
    _wait(browser, lambda d: any("fezziwig" in o.text for o in d.find_elements(By.CSS_SELECTOR, "#repo option")), 30)
    assert (served.repos_dir / "fezziwig.rag" / "manifest.json").is_file()
    answer = httpx.post(served.url + "/v1/ask", json={"question": "Who gave a ball for his apprentices?",
                                                      "repo": "fezziwig"}, timeout=120).json()
    assert answer["decision"] in ("answered", "refused")  # the new repository is served


def _requested_urls(driver) -> list[str]:
    """The URLs of the requests the browser sent since the last call (Chromium's network log)."""
    import json

    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _leaving_loopback(urls: list[str], base: str) -> list[str]:
    """The network requests (http, https, ws, wss) that went anywhere but this server; the
    browser's own chrome:// pages, data: and blob: URLs do not touch the network."""
    network = [u for u in urls if u.split(":", 1)[0] in ("http", "https", "ws", "wss")]
    return [u for u in network if not u.startswith(base + "/")]


def test_docs_page_loads_offline_with_no_request_leaving_loopback(browser, served):
    from selenium.webdriver.common.by import By

    _requested_urls(browser)  # forget what earlier tests requested
    browser.get(served.url + "/docs")
    title = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".swagger-ui .info .title"), 60)[0]
    assert "PAGE-RAG" in title.text
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path"), 60)  # the schema's operations
    paths = {e.text.replace("\u200b", "") for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
    assert {"/v1/ask", "/v1/chat/completions", "/v1/builds"} <= paths
    browser.get(served.url + "/")  # the page too: everything it loads is the server's
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#repo option"), 60)
    urls = _requested_urls(browser)
    assert any(u.endswith("/static/swagger-ui/swagger-ui-bundle.js") for u in urls)
    assert _leaving_loopback(urls, served.url) == []


def _screenshot(driver, path: Path, also: str | None = None) -> None:
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000
    if also:
        Path(also).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, also)
