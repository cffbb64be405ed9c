"""Safe by default: loopback bind, an API key for anything else, build paths confined to the
build root, upload type and size limits, a question length limit, and every error a JSON body
with a one-line message and the right status — never a traceback."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from serving import ANSWERABLE, REPO, ConnectionRecorder, ServerProcess, ThreadServer

KEY = "test-key-0123456789"


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    message = error["message"]
    assert error["status"] == status and error["type"]
    assert "\n" not in message and "Traceback" not in response.text and len(message) <= 400
    return message


# ---- binding --------------------------------------------------------------------------------

def test_binding_beyond_loopback_without_a_key_is_refused(printer_repo):
    env = {k: v for k, v in os.environ.items() if k != "PAGERAG_API_KEY"}
    run = subprocess.run([sys.executable, "-m", "pagerag", "serve", "--repo", str(printer_repo), "--host", "0.0.0.0"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "API key" in run.stderr and "Traceback" not in run.stderr
    short = subprocess.run([sys.executable, "-m", "pagerag", "serve", "--repo", str(printer_repo), "--host", "0.0.0.0",
                            "--api-key", "short"], capture_output=True, text=True, timeout=120, env=env)
    assert short.returncode == 2 and "too short" in short.stderr
    missing = subprocess.run([sys.executable, "-m", "pagerag", "serve", "--repo", str(printer_repo.parent / "none.rag")],
                             capture_output=True, text=True, timeout=120, env=env)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no repository here" in missing.stderr


def test_a_port_in_use_is_one_line_and_no_url(printer_repo):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        started = time.monotonic()
        run = subprocess.run([sys.executable, "-m", "pagerag", "serve", "--repo", str(printer_repo), "--port", str(port)],
                             capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    assert run.returncode != 0, output
    assert f"port {port}" in run.stderr and "already in use" in run.stderr and "--port" in run.stderr
    assert "http://" not in output and "loading" not in output and "Traceback" not in output  # nothing like success
    assert run.stderr.count("\n") == 1
    assert time.monotonic() - started < 120  # refused before the repositories load


def test_port_zero_prints_the_port_really_bound(printer_repo):
    import re

    process = subprocess.Popen([sys.executable, "-m", "pagerag", "serve", "--repo", str(printer_repo), "--port", "0",
                                "--llm", "extractive"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 240
        line = ""
        while "http://" not in line and time.monotonic() < deadline:
            line = process.stderr.readline()
            assert line or process.poll() is None, "the server exited"
        port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", line).group(1))
        assert port != 0
        assert httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=30).json()["status"] == "ok"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_dns_rebinding_and_cross_site_requests_are_refused(served):
    message = error_of(httpx.post(served.url + "/v1/ask", json={"question": ANSWERABLE, "repo": REPO},
                                  headers={"Host": "attacker.example"}), 421)
    assert "attacker.example" in message
    error_of(httpx.post(served.url + "/v1/ask", json={"question": ANSWERABLE, "repo": REPO},
                        headers={"Origin": "http://attacker.example"}), 403)
    same_origin = httpx.get(served.url + "/v1/repos", headers={"Origin": served.url})
    assert same_origin.status_code == 200


# ---- API key --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keyed(printer_repo):
    from pagerag.serve.config import ServeConfig

    config = ServeConfig(repos={REPO: printer_repo}, api_key=KEY, llm="extractive", warm=False).check()
    with ThreadServer(config) as server:
        yield server


def test_api_key_is_required_when_configured(keyed):
    error_of(httpx.get(keyed.url + "/v1/repos"), 401)
    assert httpx.get(keyed.url + "/v1/repos").headers["www-authenticate"] == "Bearer"
    assert "wrong" in error_of(httpx.get(keyed.url + "/v1/repos", headers={"Authorization": "Bearer nope"}), 401)
    error_of(httpx.post(keyed.url + "/v1/chat/completions", json={"model": REPO, "messages": []}), 401)
    ok = httpx.post(keyed.url + "/v1/ask", json={"question": ANSWERABLE},  # one repository: no name needed
                    headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
    assert ok.status_code == 200 and ok.json()["decision"] == "answered"
    assert httpx.get(keyed.url + "/").status_code == 200  # the page holds no data; its API calls need the key


def test_path_builds_are_off_without_a_build_root(keyed):
    message = error_of(httpx.post(keyed.url + "/v1/builds", json={"path": "book.txt", "repo": "x"},
                                  headers={"Authorization": f"Bearer {KEY}"}), 403)
    assert "--build-root" in message


# ---- LLM backends: the operator's only ------------------------------------------------------

@pytest.fixture(scope="module")
def keyed_environment(printer_repo):
    """A server started without an LLM (auto: no endpoint, no GGUF) whose environment holds an
    OpenAI key, with every proxy variable pointing at a recorder: any attempt to reach an LLM
    endpoint — api.openai.com included — shows up as a connection to the recorder."""
    with ConnectionRecorder() as recorder:
        env = {"OPENAI_API_KEY": "sk-operator-secret-0123456789", "HTTPS_PROXY": recorder.url,
               "HTTP_PROXY": recorder.url, "ALL_PROXY": recorder.url, "https_proxy": recorder.url,
               "http_proxy": recorder.url, "all_proxy": recorder.url, "NO_PROXY": "", "no_proxy": "",
               "OPENAI_BASE_URL": "", "PAGERAG_LLM__GGUF": ""}
        with ServerProcess(["--repo", f"{REPO}={printer_repo}", "--no-builds"], env=env) as server:
            server.recorder = recorder
            yield server


def test_a_request_cannot_choose_a_backend_the_operator_did_not_configure(keyed_environment):
    url, recorder = keyed_environment.url, keyed_environment.recorder
    chat = {"model": REPO, "messages": [{"role": "user", "content": ANSWERABLE}]}
    refused = []
    for backend in ("openai", "llamacpp"):
        for path, body in (("/v1/ask", {"question": ANSWERABLE}), ("/v1/retrieve", {"question": ANSWERABLE}),
                           ("/v1/chat/completions", chat)):
            refused.append(httpx.post(url + path, json={**body, "llm": backend}, timeout=300))
    time.sleep(1.0)  # a connection attempt in flight would have arrived by now
    assert recorder.seen == []  # nothing tried to leave the machine (no proxy CONNECT, no request)
    for response in refused:
        message = error_of(response, 400)
        assert "is not offered" in message and "extractive" in message
    ok = httpx.post(url + "/v1/ask", json={"question": ANSWERABLE, "llm": "auto"}, timeout=120).json()
    assert ok["decision"] == "answered" and ok["backend"] == "extractive"
    assert httpx.get(url + "/v1/health").json()["llms"] == ["extractive"]
    assert recorder.seen == []


def test_backends_the_operator_allowed_may_be_chosen(printer_repo):
    from pagerag.serve.config import ServeConfig

    from pagerag.errors import ConfigError

    config = ServeConfig(repos={REPO: printer_repo}, llm="extractive", allow_llms=["openai"], warm=False).check()
    assert config.offered_llms == ("extractive", "openai")
    assert config.settings(llm="openai").llm.backend == "openai"
    with pytest.raises(ConfigError, match="'llamacpp' is not offered"):
        config.settings(llm="llamacpp")
    with pytest.raises(ConfigError, match="unknown --allow-llm"):
        ServeConfig(repos={REPO: printer_repo}, allow_llms=["gpt"]).check()


# ---- questions ------------------------------------------------------------------------------

def test_question_limits_and_malformed_requests(served):
    ask = served.url + "/v1/ask"
    assert "too long" in error_of(httpx.post(ask, json={"question": "why " * 1000, "repo": REPO}), 413)
    assert "empty" in error_of(httpx.post(ask, json={"question": "   ", "repo": REPO}, timeout=60), 400)
    assert "required" in error_of(httpx.post(ask, json={"repo": REPO}), 422)
    assert "JSON" in error_of(httpx.post(ask, content=b"{not json", headers={"Content-Type": "application/json"}), 422)
    assert "question" in error_of(httpx.post(ask, json={"question": 42, "repo": REPO}), 422)
    assert "colour" in error_of(httpx.post(ask, json={"question": ANSWERABLE, "repo": REPO, "colour": 1}), 422)
    assert "no repository named 'nope'" in error_of(httpx.post(ask, json={"question": ANSWERABLE, "repo": "nope"}), 404)
    assert "unknown pipeline" in error_of(httpx.post(ask, json={"question": ANSWERABLE, "repo": REPO,
                                                                "pipeline": "turbo"}), 400)
    error_of(httpx.post(ask, json={"question": ANSWERABLE, "repo": REPO, "llm": "gpt"}), 422)
    error_of(httpx.get(served.url + "/v1/nothing-here"), 404)
    error_of(httpx.delete(ask), 405)


def test_oversized_bodies_are_refused_declared_or_streamed(served):
    big = b'{"question": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    assert "too large" in error_of(httpx.post(served.url + "/v1/ask", content=big,
                                              headers={"Content-Type": "application/json"}), 413)

    def chunks():  # no Content-Length: the limit is enforced while the body streams in
        for _ in range(40):
            yield b"x" * 65536

    error_of(httpx.post(served.url + "/v1/ask", content=chunks(), headers={"Content-Type": "application/json"}), 413)


# ---- builds ---------------------------------------------------------------------------------

def test_build_paths_are_confined_to_the_build_root(served, build_root, tmp_path):
    builds = served.url + "/v1/builds"
    assert "outside the build root" in error_of(httpx.post(builds, json={"path": "../", "repo": "x"}), 403)
    error_of(httpx.post(builds, json={"path": "books/../../etc", "repo": "x"}), 403)
    error_of(httpx.post(builds, json={"path": "/etc/passwd", "repo": "x"}), 403)
    outside = tmp_path / "secret.txt"
    outside.write_text("a secret\n" * 10)
    link = build_root / "link-out.txt"
    link.symlink_to(outside)
    try:
        error_of(httpx.post(builds, json={"path": "link-out.txt", "repo": "x"}), 403)
    finally:
        link.unlink()
    assert "does not exist" in error_of(httpx.post(builds, json={"path": "books/none.txt", "repo": "x"}), 404)
    error_of(httpx.post(builds, json={"path": "books", "repo": "../evil"}), 400)
    error_of(httpx.post(builds, json={"path": "books"}), 422)
    error_of(httpx.post(builds, content=b"books", headers={"Content-Type": "text/plain"}), 415)


def test_a_symlink_inside_a_folder_cannot_lead_a_build_outside_the_root(served, build_root, tmp_path):
    """The issue's probe: books/shelf/secret.txt links to a file outside --build-root."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("The vault code is 4711.\n" * 20)
    shelf = build_root / "shelf"
    (shelf / "deeper").mkdir(parents=True)
    (shelf / "own.txt").write_text("Mr. Fezziwig kept a warehouse in the city of London.\n" * 3)
    builds = served.url + "/v1/builds"
    try:
        cases = [("secret.txt", outside / "secret.txt"),  # absolute link to a file
                 ("deeper/rel.txt", Path("../../../") / outside.relative_to(build_root.parent) / "secret.txt"),
                 ("deeper/folder", outside)]  # a link to a folder, one level down
        for name, target in cases:
            link = shelf / name
            link.symlink_to(target)
            assert outside.joinpath("secret.txt").read_text() in (
                link.read_text() if link.is_file() else (link / "secret.txt").read_text())
            message = error_of(httpx.post(builds, json={"path": "shelf", "repo": "shelfbook"}), 403)
            assert name in message and "outside the build root" in message and str(outside) not in message
            link.unlink()
        (shelf / "loop").symlink_to(Path(".."), target_is_directory=True)  # a loop back into the root
        (shelf / "a.txt").symlink_to(Path("b.txt"))
        (shelf / "b.txt").symlink_to(Path("a.txt"))
        assert "loop" in error_of(httpx.post(builds, json={"path": "shelf", "repo": "shelfbook"}), 400)
        jobs = httpx.get(builds).json()["builds"]
        assert not [j for j in jobs if j["repo"] == "shelfbook"]  # nothing was queued
        assert "shelfbook" not in {m["id"] for m in httpx.get(served.url + "/v1/models").json()["data"]}
    finally:
        shutil.rmtree(shelf)


def test_the_build_process_checks_the_root_again_as_it_reads(build_root, tmp_path):
    """A link made after the request was checked: the build process itself refuses it."""
    import json

    outside = tmp_path / "outside.txt"
    outside.write_text("The vault code is 4711.\n" * 20)
    shelf = tmp_path / "root" / "shelf"
    shelf.mkdir(parents=True)
    (shelf / "late.txt").symlink_to(outside)
    run = subprocess.run([sys.executable, "-m", "pagerag.serve.build_worker", "--root", str(shelf.parent),
                          "--repo", str(tmp_path / "late.rag"), str(shelf)],
                         capture_output=True, text=True, timeout=300)
    events = [json.loads(line) for line in run.stdout.splitlines()]
    assert run.returncode != 0 and events[-1]["event"] == "error", run.stdout + run.stderr
    assert "shelf/late.txt" in events[-1]["message"] and "outside the build root" in events[-1]["message"]
    assert not (tmp_path / "late.rag").exists()


def test_uploads_are_limited_in_type_and_size(served):
    builds = served.url + "/v1/builds"
    message = error_of(httpx.post(builds, data={"repo": "up"}, files={"files": ("book.rtf", b"{\\rtf1", "application/rtf")}), 415)
    assert "book.rtf" in message and "not a supported file" in message
    message = error_of(httpx.post(builds, data={"repo": "up"}, files={"files": ("book.pdf", b"MZ\x90\x00", "application/pdf")}), 415)
    assert "'book.pdf' is not a PDF" in message
    message = error_of(httpx.post(builds, data={"repo": "up"}, files={"files": ("book.epub", b"%PDF-1.4", "application/epub+zip")}), 415)
    assert "'book.epub' is not an EPUB" in message
    error_of(httpx.post(builds, data={"repo": "up"}, files={"files": ("book.txt", b"MZ\x00\x00\x01binary", "text/plain")}), 415)
    big = b"It was the best of times. " * 20000  # ~0.5 MB, over this server's 0.2 MB limit
    assert "too large" in error_of(httpx.post(builds, data={"repo": "up"}, files={"files": ("big.txt", big, "text/plain")}), 413)
    assert "no files" in error_of(httpx.post(builds, files={"repo": (None, "up")}), 400)  # multipart, no file
    error_of(httpx.post(builds, data={"repo": "up"}), 415)  # a urlencoded form is neither JSON nor an upload
