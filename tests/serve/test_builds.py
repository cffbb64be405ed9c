"""Build jobs are bounded: a limited queue (429 with Retry-After), cancelling (DELETE
/v1/builds/{id}) that publishes nothing, uploads deleted once their job ends, and a repository
a job built removable through the API when the operator allows it — on a real server whose
builds run in real worker processes."""
from __future__ import annotations

import json
import shutil
import time

import httpx
import pytest
from serving import ThreadServer

BOOK = ("Mr. Fezziwig kept a warehouse in the city of London.\n\n"
        "Every Christmas Eve Mr. Fezziwig gave a ball for his apprentices, Ebenezer and Dick Wilkins.\n\n"
        "Mrs. Fezziwig danced with Mr. Fezziwig, and the fiddler played until eleven o'clock.\n")
# Long enough (~40k words) that a build is still embedding or reading when the test cancels it: a
# cancel that comes once the build is publishing is too late by design (the job ends `done`).
CLERKS = ("Dick Wilkins", "Tom Sprigg", "Ned Harrow", "Will Castle", "Amos Pike", "Jonas Reed", "Eli Marsh")
PLACES = ("Cornhill", "Thames Street", "Leadenhall", "Fish Street Hill", "Cheapside", "Bishopsgate")
LONG_BOOK = "\n\n".join(
    f"In the winter of {1780 + i % 40} the clerk {CLERKS[i % 7]} counted {i * 7 % 997} ledgers in the warehouse on "
    f"{PLACES[i % 6]}, and Mr. Fezziwig paid him {i % 13 + 2} shillings for the work of day {i}. "
    f"{CLERKS[(i + 3) % 7]} carried the candles from {PLACES[(i + 1) % 6]} before the bells rang {i % 12 + 1}."
    for i in range(1200))


@pytest.fixture(scope="module")
def builder(printer_repo, tmp_path_factory):
    """A server that allows removal and two build jobs at once, serving a copy of the printer repository."""
    from pagerag.serve.config import ServeConfig

    repos = tmp_path_factory.mktemp("builder")
    shutil.copytree(printer_repo, repos / "printer.rag")
    config = ServeConfig(repos={"printer": repos / "printer.rag"}, repos_dir=repos, llm="extractive", warm=False,
                         max_builds=2, allow_remove=True).check()
    with ThreadServer(config) as server:
        server.repos_dir = repos
        yield server


def upload(url: str, repo: str, text: str = BOOK, name: str = "book.txt") -> httpx.Response:
    return httpx.post(url + "/v1/builds", data={"repo": repo}, files={"files": (name, text.encode(), "text/plain")},
                      timeout=60)


def wait_for(url: str, job_id: str, statuses: tuple[str, ...], timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = httpx.get(f"{url}/v1/builds/{job_id}", timeout=30).json()
        if job["status"] in statuses:
            return job
        time.sleep(0.2)
    raise TimeoutError(f"job {job_id} never reached {statuses}")


def leftovers(repos_dir, name: str) -> list[str]:
    """Anything a build of `name` left beside the repositories, and any upload still kept."""
    found = [p.name for p in repos_dir.iterdir() if p.name == f"{name}.rag" or p.name.startswith(f".{name}.rag.")]
    uploads = repos_dir / ".uploads"
    return found + ([f".uploads/{p.name}" for p in uploads.iterdir()] if uploads.is_dir() else [])


def models(url: str) -> set[str]:
    return {m["id"] for m in httpx.get(url + "/v1/models").json()["data"]}


def test_the_queue_is_bounded_and_jobs_can_be_cancelled(builder):
    url = builder.url
    first, second = upload(url, "first", text=LONG_BOOK), upload(url, "second")
    assert first.status_code == 202 and second.status_code == 202, (first.text, second.text)
    third = upload(url, "third")
    assert third.status_code == 429, third.text
    assert int(third.headers["retry-after"]) > 0 and "limit 2" in third.json()["error"]["message"]
    again = upload(url, "second")
    assert again.status_code == 409 and "already" in again.json()["error"]["message"]
    assert len(list((builder.repos_dir / ".uploads").iterdir())) == 2  # the refused uploads kept nothing

    queued = httpx.delete(f"{url}/v1/builds/{second.json()['id']}", timeout=60)  # one build runs at a time
    assert queued.status_code == 200 and queued.json()["status"] == "cancelled", queued.text
    wait_for(url, first.json()["id"], ("running",))
    deadline = time.monotonic() + 300
    while httpx.get(f"{url}/v1/builds/{first.json()['id']}").json()["stage"] is None and time.monotonic() < deadline:
        time.sleep(0.2)  # until the build works on the text in its process (long before it publishes)
    running = httpx.delete(f"{url}/v1/builds/{first.json()['id']}", timeout=60)
    assert running.status_code in (200, 202), running.text
    ended = wait_for(url, first.json()["id"], ("cancelled", "done", "failed"))
    assert ended["status"] == "cancelled", ended
    for name in ("first", "second"):
        assert leftovers(builder.repos_dir, name) == [], name  # no repository, staging, cache or upload
        assert name not in models(url)
    gone = httpx.delete(f"{url}/v1/builds/{first.json()['id']}", timeout=60)
    assert gone.status_code == 409 and "cancelled" in gone.json()["error"]["message"]
    assert upload(url, "third").status_code == 202  # room again
    httpx.delete(f"{url}/v1/builds/{httpx.get(url + '/v1/builds').json()['builds'][-1]['id']}", timeout=60)


def test_cancelling_a_rebuild_keeps_the_served_version(builder):
    url = builder.url
    before = httpx.get(url + "/v1/health").json()["repos"]["printer"]
    manifest = (builder.repos_dir / "printer.rag" / "manifest.json").read_bytes()
    job = upload(url, "printer").json()
    wait_for(url, job["id"], ("running",))
    cancelled = httpx.delete(f"{url}/v1/builds/{job['id']}", timeout=60)
    assert cancelled.status_code in (200, 202)
    assert wait_for(url, job["id"], ("cancelled", "done", "failed"))["status"] == "cancelled"
    assert (builder.repos_dir / "printer.rag" / "manifest.json").read_bytes() == manifest
    assert not list(builder.repos_dir.glob(".printer.rag.staging-*"))
    assert httpx.get(url + "/v1/health").json()["repos"]["printer"] == before


def test_uploads_go_once_built_or_failed_and_a_built_repository_can_be_removed(builder, served):
    url = builder.url
    built = wait_for(url, upload(url, "fezz").json()["id"], ("done", "failed", "cancelled"))
    assert built["status"] == "done", built
    assert built["sources"] == ["book.txt"]
    failed = wait_for(url, upload(url, "blank", text=" \n\n   \n", name="blank.txt").json()["id"],
                      ("done", "failed", "cancelled"))
    assert failed["status"] == "failed" and "blank.txt" in failed["error"] and "whitespace" in failed["error"]
    assert str(builder.repos_dir) not in json.dumps(failed)  # the file's name, not where the server kept it
    assert leftovers(builder.repos_dir, "blank") == []  # the upload and the failed build left nothing
    assert "fezz" in models(url) and (builder.repos_dir / "fezz.rag").is_dir()

    operator = httpx.delete(url + "/v1/repos/printer", timeout=60)
    assert operator.status_code == 403 and "operator" in operator.json()["error"]["message"]
    assert httpx.delete(url + "/v1/repos/nope", timeout=60).status_code == 404
    removed = httpx.delete(url + "/v1/repos/fezz", timeout=60)
    assert removed.status_code == 200 and removed.json() == {"removed": "fezz"}
    assert "fezz" not in models(url) and leftovers(builder.repos_dir, "fezz") == []
    ask = httpx.post(url + "/v1/ask", json={"question": "Who gave a ball?", "repo": "fezz"}, timeout=60)
    assert ask.status_code == 404

    off = httpx.delete(served.url + "/v1/repos/swap", timeout=60)  # a server started without --allow-remove
    assert off.status_code == 403 and "--allow-remove" in off.json()["error"]["message"]

