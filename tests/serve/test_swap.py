"""A rebuild of a served repository swaps atomically: questions in flight finish on the old
version, new ones see the new version, none fails — through the HTTP API with a real build job
(its progress followed as server-sent events), and deterministically with the registry while a
question holds the old version across the publish."""
from __future__ import annotations

import json
import shutil
import threading
import time

import httpx
from helpers.questions import ARRIVAL, METCALF
from serving import ANSWERABLE, next_version

QUESTIONS = [ANSWERABLE, ARRIVAL, METCALF]  # training questions of the served book (helpers/questions.py)


def _hammer(url: str, stop: threading.Event, log: list, worker: int) -> None:
    with httpx.Client(timeout=180) as client:
        i = worker
        while not stop.is_set():
            started = time.monotonic()
            response = client.post(url + "/v1/ask", json={"question": QUESTIONS[i % len(QUESTIONS)], "repo": "swap"})
            log.append({"worker": worker, "started": started, "ended": time.monotonic(), "status": response.status_code,
                        "version": response.headers.get("x-pagerag-version", ""), "body": response.json()})
            i += 1
            stop.wait(0.15)  # leave the build some CPU: two clients still keep questions in flight


def _follow(url: str, job_id: str) -> list[dict]:
    events = []
    with httpx.stream("GET", f"{url}/v1/builds/{job_id}/events", timeout=600) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                event["at"] = time.monotonic()
                events.append(event)
    return events


def _stored_source(repo) -> str:
    """The normalised text a repository's offsets point into (one document here)."""
    (source,) = (repo / "sources").glob("*.txt")
    return source.read_text(encoding="utf-8")


def test_rebuild_under_load_swaps_atomically(served):
    before = httpx.get(served.url + "/v1/health").json()["repos"]["swap"]
    old_text = _stored_source(served.swap_repo)
    stop, log = threading.Event(), []
    workers = [threading.Thread(target=_hammer, args=(served.url, stop, log, w)) for w in range(2)]
    for w in workers:
        w.start()
    try:
        response = httpx.post(served.url + "/v1/builds", json={"path": "books/printer_variant.txt", "repo": "swap"})
        assert response.status_code == 202, response.text
        job = response.json()
        assert response.headers["location"] == f"/v1/builds/{job['id']}"
        events = _follow(served.url, job["id"])
        done_at = events[-1]["at"]
        while len([r for r in log if r["started"] > done_at]) < 4:  # new questions after the swap
            time.sleep(0.1)
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=300)

    # the build's progress streamed as events, ending with the swap
    statuses = [e["status"] for e in events if e["event"] == "status"]
    assert statuses[0] == "queued" and statuses[-1] == "done" and "loading" in statuses, statuses
    progress = [e for e in events if e["event"] == "progress"]
    assert {"chunk", "embed", "extract", "publish"} <= {e["stage"] for e in progress}
    overall = [e["overall"] for e in progress]
    assert overall == sorted(overall) and 0 < overall[-1] <= 1
    after = events[-1]["version"]
    assert after != before and httpx.get(f"{served.url}/v1/builds/{job['id']}").json()["status"] == "done"

    # no question failed; each came from exactly one version; new questions saw the new one
    assert log and all(r["status"] == 200 for r in log), [r for r in log if r["status"] != 200][:2]
    versions = {r["version"] for r in log}
    assert versions <= {f"swap@{before}", f"swap@{after}"}
    assert f"swap@{before}" in versions and f"swap@{after}" in versions
    assert all(r["version"] == f"swap@{after}" for r in log if r["started"] > done_at)
    for worker in (0, 1):
        seen = [r["version"] for r in sorted(log, key=lambda r: r["started"]) if r["worker"] == worker]
        assert seen == sorted(seen, key=lambda v: v != f"swap@{before}")  # never back to the old version
    new_text = _stored_source(served.swap_repo)
    assert new_text != old_text
    for r in log:  # every citation is a span of the text of the version that answered
        text = old_text if r["version"] == f"swap@{before}" else new_text
        for c in r["body"]["citations"]:
            assert text[c["start"]:c["end"]] == c["quote"]

    # the old version's pinned files go once its last question has ended
    old_pin = served.swap_repo.parent / ".swap.rag.serve" / before
    deadline = time.monotonic() + 30
    while old_pin.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not old_pin.exists()


def test_question_in_flight_keeps_the_old_version_across_a_publish(printer_repo, tmp_path):
    from pagerag.repository import publish
    from pagerag.serve.config import ServeConfig
    from pagerag.serve.registry import Registry

    repo = tmp_path / "r.rag"
    shutil.copytree(printer_repo, repo)
    registry = Registry(ServeConfig(repos={"r": repo}, llm="extractive", warm=False).check()).start()
    try:
        with registry.use("r") as old:  # a question in flight
            staging = tmp_path / ".r.rag.staging-test"
            shutil.copytree(repo, staging)
            manifest = json.loads((staging / "manifest.json").read_text())
            manifest["created"] = "2099-01-01T00:00:00Z"
            (staging / "manifest.json").write_text(json.dumps(manifest))
            publish(staging, repo)  # the build's own atomic swap: the old directory is deleted
            assert not staging.exists()
            new = next_version(registry, "r", old, timeout=120)
            with registry.use("r") as now:
                assert now is new  # a new question gets the new version
            answer = old.rag(registry.config.settings()).ask(ANSWERABLE)  # the old one still answers
            assert answer.decision == "answered" and old.path.is_dir()
            assert old.repository.manifest["created"] != "2099-01-01T00:00:00Z"
        assert not old.path.exists()  # its last question ended: its files are gone
        assert new.path.is_dir() and new.repository.manifest["created"] == "2099-01-01T00:00:00Z"
    finally:
        registry.close()
