"""Start and stop real servers for the tests: `pagerag serve` in its own process, or the same
app under uvicorn in a thread of the test process (for configurations a test needs briefly)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

from helpers.network import ConnectionRecorder  # noqa: F401  (the serve tests import it from here)
from helpers.questions import (ANSWER, ANSWERABLE, EXCERPT_DOC, EXCERPT_FILE,  # noqa: F401  (the tests' questions)
                               UNANSWERABLE, UNANSWERABLE_SUBJECT)

# The served repository is the training-book excerpt (tests/conftest.py: printer_repo) under this
# name; ANSWERABLE (Novel-10146-a02, answer ANSWER) and UNANSWERABLE (Novel-10146-u20, refused
# insufficient_evidence) are questions of that book's training set (helpers/questions.py).
REPO = "printer"
STARTUP_S = 240.0  # a loaded 2-core machine needs long to import torch and load a repository


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(url: str, alive=lambda: True, timeout: float = STARTUP_S, headers: dict | None = None) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("the server exited while starting")
        try:
            if httpx.get(url + "/v1/health", headers=headers or {}, timeout=2).status_code in (200, 401):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s")


class ServerProcess:
    """`python -m pagerag serve ARGS --port FREE` until the block ends."""

    def __init__(self, args: list[str], env: dict | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [sys.executable, "-m", "pagerag", "serve", *args, "--port", str(self.port)]
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> "ServerProcess":
        self.process = subprocess.Popen(self.args, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, stdin=subprocess.DEVNULL)
        self.log: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        try:
            wait_ready(self.url, alive=lambda: self.process.poll() is None)
        except Exception as exc:
            self.__exit__(None, None, None)
            raise RuntimeError(f"{exc}; server output:\n" + "\n".join(self.log[-30:])) from None
        return self

    def _drain(self) -> None:
        for line in self.process.stdout:
            self.log.append(line.rstrip())

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class ThreadServer:
    """The app for `config` under uvicorn in a thread of this process, on a free port."""

    def __init__(self, config):
        self.config = config
        self.config.port = free_port()
        self.url = f"http://127.0.0.1:{self.config.port}"

    def __enter__(self) -> "ThreadServer":
        import uvicorn

        from pagerag.serve.app import create_app
        from pagerag.serve.registry import Registry

        self.registry = Registry(self.config).start()
        app = create_app(self.config, self.registry)
        self.server = uvicorn.Server(uvicorn.Config(app, host=self.config.host, port=self.config.port,
                                                    log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


def next_version(registry, name: str, old, timeout: float = 180.0):
    """After a publish: ask once (the registry notices the change and opens the new version in
    the background), then wait until it is the current one; it must be a different version."""
    with registry.use(name):
        pass
    deadline = time.monotonic() + timeout
    while registry.current(name) is old and time.monotonic() < deadline:
        time.sleep(0.1)
    new = registry.current(name)
    assert new is not old and new.version != old.version
    return new
