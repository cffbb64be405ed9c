"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests (the process boundary where a
test double belongs): `/v1/models` and `/v1/chat/completions`, streaming (SSE) and not, with
fault modes a real deployment shows — 5xx, a server slower than the client's timeout, a
truncated JSON body, an HTML page where JSON belongs, 4xx, and servers that ignore or reject
`logprobs`. It counts requests per path so tests can prove retries and cache hits.

    with LoopbackOpenAIServer(reply=lambda body: "hello") as server:
        settings = LLMSettings(base_url=server.base_url, ...)
"""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Reply = Callable[[dict], str]

# Fault modes for /v1/chat/completions.
MODES = ("ok", "500", "timeout", "malformed", "html", "4xx", "reject_logprobs", "ignore_logprobs")


def _echo(body: dict) -> str:
    last = body["messages"][-1]["content"] if body.get("messages") else ""
    return f"echo: {last}"


def words(text: str) -> int:
    """The server's own token count (whitespace words), deliberately unlike tiktoken's, so a test
    can tell which count the client recorded."""
    return len(text.split())


class LoopbackOpenAIServer:
    def __init__(
        self,
        *,
        model: str = "loopback-model",
        reply: Reply = _echo,
        mode: str = "ok",
        fail_first: int = 0,
        delay_s: float = 5.0,
        status: int = 401,
        include_usage: bool = True,
        top_logprobs: dict[str, float] | Callable[[dict], dict[str, float]] | None = None,
    ) -> None:
        assert mode in MODES, mode
        self.model = model
        self.reply = reply
        self.mode = mode
        self.fail_first = fail_first  # the first N chat requests answer 500, then `mode` applies
        self.delay_s = delay_s  # how long "timeout" mode stalls before answering
        self.status = status  # the status "4xx" mode answers with
        self.include_usage = include_usage
        self.top_logprobs = top_logprobs or {"Yes": -0.1, "No": -2.4, "Maybe": -4.0}
        self.counts: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle --------------------------------------------------------------------------

    def start(self) -> "LoopbackOpenAIServer":
        handler = type("Handler", (_Handler,), {"server_state": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)  # port 0: a free port
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="loopback-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases handlers stalled in "timeout" mode
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "LoopbackOpenAIServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # ---- behaviour --------------------------------------------------------------------------

    def _next_chat_mode(self, body: dict) -> str:
        with self._lock:
            self.counts["/v1/chat/completions"] += 1
            self.bodies.append(body)
            failing = self.counts["/v1/chat/completions"] <= self.fail_first
        return "500" if failing else self.mode

    def completion_body(self, body: dict, text: str) -> dict:
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        text, finish = _truncate(text, body.get("max_tokens"))
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": finish, "logprobs": None}
        if body.get("logprobs") and self.mode != "ignore_logprobs":
            choice["logprobs"] = {"content": [self._logprob_entry(body)]}
        out: dict[str, Any] = {"id": "chatcmpl-loopback", "object": "chat.completion", "created": int(time.time()),
                               "model": self.model, "choices": [choice]}
        if self.include_usage:
            out["usage"] = {"prompt_tokens": words(prompt), "completion_tokens": words(text),
                            "total_tokens": words(prompt) + words(text)}
        return out

    def _logprob_entry(self, body: dict) -> dict:
        k = int(body.get("top_logprobs") or 0)
        table = self.top_logprobs(body) if callable(self.top_logprobs) else self.top_logprobs
        ranked = sorted(table.items(), key=lambda kv: -kv[1])[: max(k, 1)]
        token, logprob = ranked[0]
        return {"token": token, "logprob": logprob, "bytes": list(token.encode()),
                "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in ranked]}


def _truncate(text: str, max_tokens: int | None) -> tuple[str, str]:
    """Honour max_tokens (in the server's word tokens) as a real server does."""
    if not max_tokens or words(text) <= max_tokens:
        return text, "stop"
    return " ".join(text.split()[:max_tokens]), "length"


class _Handler(BaseHTTPRequestHandler):
    server_state: LoopbackOpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    # ---- plumbing ---------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode())

    def _read_json(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    # ---- routes -----------------------------------------------------------------------------

    def do_GET(self) -> None:
        state = self.server_state
        with state._lock:
            state.counts[self.path] += 1
        if self.path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [
                {"id": state.model, "object": "model", "created": 0, "owned_by": "loopback"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        state = self.server_state
        if self.path != "/v1/chat/completions":
            with state._lock:
                state.counts[self.path] += 1
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        body = self._read_json()
        mode = state._next_chat_mode(body)
        if mode == "500":
            self._send_json(500, {"error": {"message": "loopback internal error", "type": "server_error"}})
        elif mode == "timeout":
            state._stopping.wait(state.delay_s)  # stall longer than the client waits
            try:
                self._answer(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up long ago, as intended
        elif mode == "malformed":
            self._send(200, b'{"id": "chatcmpl-loopback", "object": "chat.completion", "choices": [{"index": 0, "mess')
        elif mode == "html":
            self._send(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html")
        elif mode == "4xx":
            self._send_json(state.status, {"error": {"message": f"loopback refuses with {state.status}",
                                                     "type": "invalid_request_error"}})
        elif mode == "reject_logprobs" and body.get("logprobs"):
            self._send_json(400, {"error": {"message": "logprobs is not supported", "type": "invalid_request_error"}})
        else:
            self._answer(body)

    def _answer(self, body: dict) -> None:
        state = self.server_state
        text = state.reply(body)
        if body.get("stream"):
            self._stream(body, text)
        else:
            self._send_json(200, state.completion_body(body, text))

    def _stream(self, body: dict, text: str) -> None:
        """Server-sent events, one word per chunk, usage last when asked for (as OpenAI does)."""
        state = self.server_state
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        full = state.completion_body(body, text)
        text, last_finish = full["choices"][0]["message"]["content"], full["choices"][0]["finish_reason"]
        pieces = [w + " " for w in text.split(" ")]
        pieces[-1] = pieces[-1][:-1]
        base = {"id": "chatcmpl-loopback", "object": "chat.completion.chunk", "created": full["created"],
                "model": state.model}
        for i, piece in enumerate(pieces):
            finish = last_finish if i == len(pieces) - 1 else None
            self._event({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": finish}]})
        wants_usage = (body.get("stream_options") or {}).get("include_usage")
        if wants_usage and "usage" in full:
            self._event({**base, "choices": [], "usage": full["usage"]})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def _event(self, obj: dict) -> None:
        self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
        self.wfile.flush()
