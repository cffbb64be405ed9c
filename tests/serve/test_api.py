"""The JSON API of a real `pagerag serve` process: ask and retrieve give exactly the objects
`pagerag ask --json` / `pagerag retrieve --json` print, the repositories list their statistics,
a cited quote comes back in its surrounding text, and /docs has the OpenAPI schema."""
from __future__ import annotations

import json
from pathlib import Path

import httpx
from serving import ANSWER, ANSWERABLE, EXCERPT_DOC, EXCERPT_FILE, REPO, UNANSWERABLE, UNANSWERABLE_SUBJECT

VOLATILE = {"latency_ms"}  # timings differ between two runs; everything else must not


def test_ask_returns_the_cli_json_object(served, printer_repo):
    from pagerag.api import PageRAG

    response = httpx.post(served.url + "/v1/ask", json={"question": ANSWERABLE, "repo": REPO}, timeout=120)
    assert response.status_code == 200, response.text
    assert response.headers["x-pagerag-version"].startswith(f"{REPO}@")
    data = response.json()
    # `pagerag ask --json` prints Answer.to_dict() (pagerag/commands/ask.py); made here in-process
    expected = PageRAG(printer_repo, llm="extractive").ask(ANSWERABLE).to_dict()
    for citation in expected["citations"]:  # the one difference: a document's name, not its server path
        citation["file"], citation["doc_id"] = Path(citation["file"]).name, EXCERPT_DOC
    assert set(data) == set(expected)
    for key in set(expected) - VOLATILE:
        assert data[key] == expected[key], key
    assert data["decision"] == "answered" and ANSWER in data["answer"]
    assert "[1]" in data["answer"] and ANSWER in data["citations"][0]["quote"]


def test_offline_the_closest_passage_is_labelled_not_claimed(served):
    data = httpx.post(served.url + "/v1/ask", json={"question": UNANSWERABLE, "repo": REPO}, timeout=120).json()
    assert data["decision"] == "answered" and data["label"] == "closest_passage"
    assert "cannot check" in data["caveat"] and f"P(sufficient) {data['verdict']['score']:.2f}" in data["caveat"]
    # the model's P is below its threshold (reader-decides refuses it, below), yet nothing refuses:
    # offline the passage is shown for what it is
    assert data["verdict"]["sufficient"] is False and data["reason"] is None
    assert data["citations"] and "[1]" in data["answer"]


def test_refusal_is_a_result_with_its_reason(served):
    data = httpx.post(served.url + "/v1/ask", json={"question": UNANSWERABLE, "repo": REPO,
                                                    "pipeline": "reader-decides"}, timeout=120).json()
    assert data["decision"] == "refused"
    assert data["reason"] == "insufficient_evidence"
    assert UNANSWERABLE_SUBJECT in data["answer"] and data["citations"] == []


def test_retrieve_returns_evidence_without_deciding(served):
    response = httpx.post(served.url + "/v1/retrieve", json={"question": ANSWERABLE, "repo": REPO,
                                                             "pipeline": "passages-only"}, timeout=120)
    assert response.status_code == 200, response.text
    data = response.json()
    assert {"analysis", "plan", "evidence", "hints", "signals", "timings_ms"} <= set(data)
    assert data["plan"]["graph"] == "none"  # the passages-only preset was used
    assert any(ANSWER in e["text"] for e in data["evidence"])


def test_repos_list_the_inspect_statistics(served):
    repos = {r["name"]: r for r in httpx.get(served.url + "/v1/repos", timeout=30).json()["repos"]}
    assert {REPO, "swap"} <= set(repos)
    stats = repos[REPO]["stats"]
    for key in ("passages", "entities_raw", "entities", "relations", "communities", "isolated", "build_seconds", "words"):
        assert key in stats
    assert stats["passages"] > 10 and repos[REPO]["version"]
    assert repos[REPO]["sources"][0]["file"] == EXCERPT_FILE


def test_a_citation_opens_in_its_surrounding_text(served):
    data = httpx.post(served.url + "/v1/ask", json={"question": ANSWERABLE, "repo": REPO}, timeout=120).json()
    c = data["citations"][0]
    url = f"{served.url}/v1/repos/{REPO}/passages/{c['passage_id']}"
    context = httpx.get(url, params={"start": c["start"], "end": c["end"]}, timeout=30).json()
    assert context["quote"] == c["quote"]
    assert context["line"] == c["line"] and context["file"] == EXCERPT_FILE
    assert context["before"] and context["after"]  # surrounding text on both sides
    outside = httpx.get(url, params={"start": 0, "end": c["end"]}, timeout=30)
    assert outside.status_code == 400 and "inside passage" in outside.json()["error"]["message"]
    missing = httpx.get(f"{served.url}/v1/repos/{REPO}/passages/nope:00001", timeout=30)
    assert missing.status_code == 404


def test_one_repository_served_may_be_left_unnamed_two_may_not(served):
    response = httpx.post(served.url + "/v1/ask", json={"question": ANSWERABLE}, timeout=60)
    assert response.status_code == 400
    assert "several repositories" in response.json()["error"]["message"]


def test_openapi_schema_and_docs_page(served):
    schema = httpx.get(served.url + "/openapi.json", timeout=30).json()
    for path in ("/v1/ask", "/v1/retrieve", "/v1/repos", "/v1/builds", "/v1/builds/{job_id}",
                 "/v1/chat/completions", "/v1/models"):
        assert path in schema["paths"], path
    assert "question" in json.dumps(schema["components"]["schemas"]["QuestionRequest"])
    docs = httpx.get(served.url + "/docs", timeout=30)
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    # the console's assets come from the package, never a CDN (the browser test loads it offline)
    assert "http://" not in docs.text and "https://" not in docs.text and "//cdn" not in docs.text
    for asset in ("/static/swagger-ui/swagger-ui-bundle.js", "/static/swagger-ui/swagger-ui.css",
                  "/static/swagger-ui/LICENSE"):
        assert httpx.get(served.url + asset, timeout=30).status_code == 200, asset
    assert '"validatorUrl": null' in docs.text  # Swagger UI would otherwise send the schema to a public validator
    assert httpx.get(served.url + "/redoc", timeout=30).status_code == 404  # FastAPI's CDN-only ReDoc is off


def test_the_page_and_its_assets_are_served_from_the_package(served):
    page = httpx.get(served.url + "/", timeout=30)
    assert page.status_code == 200 and 'id="question"' in page.text
    for asset in ("/static/app.js", "/static/style.css"):
        assert httpx.get(served.url + asset, timeout=30).status_code == 200
    assert "http://" not in page.text.replace("http://www.w3.org", "") and "https://" not in page.text  # no CDN
    icon = httpx.get(served.url + "/favicon.ico", timeout=30)  # what browsers ask for on their own
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml") and b"<svg" in icon.content
    assert 'rel="icon" href="/static/favicon.svg"' in page.text


def test_clients_never_see_a_server_path(served, printer_repo, printer_excerpt, build_root):
    """Citations, evidence, repositories, build jobs and errors name documents, not server paths."""
    server_paths = {str(printer_excerpt.parent), str(printer_repo.parent), str(served.repos_dir), str(build_root)}

    def leaks(text: str) -> list[str]:
        return [p for p in server_paths if p in text]

    answer = httpx.post(served.url + "/v1/ask", json={"question": ANSWERABLE, "repo": REPO}, timeout=120)
    citation = answer.json()["citations"][0]
    assert citation["file"] == EXCERPT_FILE and citation["doc_id"] == EXCERPT_DOC
    evidence = httpx.post(served.url + "/v1/retrieve", json={"question": ANSWERABLE, "repo": REPO}, timeout=120)
    assert {e["file"] for e in evidence.json()["evidence"]} == {EXCERPT_FILE}
    chat = httpx.post(served.url + "/v1/chat/completions", timeout=120,
                      json={"model": REPO, "messages": [{"role": "user", "content": ANSWERABLE}]})
    assert chat.json()["pagerag"]["citations"][0]["doc_id"] == EXCERPT_DOC
    repos = httpx.get(served.url + "/v1/repos", timeout=30)
    assert all("path" not in r for r in repos.json()["repos"])
    context = httpx.get(f"{served.url}/v1/repos/{REPO}/passages/{citation['passage_id']}", timeout=30)
    (build_root / "empty-folder").mkdir(exist_ok=True)
    empty = httpx.post(served.url + "/v1/builds", json={"path": "empty-folder", "repo": "empty"})
    assert empty.status_code == 400 and "empty-folder" in empty.json()["error"]["message"]
    for response in (answer, evidence, chat, repos, context, empty, httpx.get(served.url + "/v1/builds")):
        assert response.status_code in (200, 400) and not leaks(response.text), (response.url, leaks(response.text))
