"""`llamacpp` backend: a local GGUF run in-process with xllamacpp (llama.cpp's own server engine,
called as Python functions — no HTTP, no subprocess).

The model is loaded once per process and shared (module-level cache keyed by the GGUF path):
`pagerag ask --interactive`, an eval run or a test session pays the load once. Requests use the
OpenAI chat format; llama.cpp applies the GGUF's own chat template. If that fails (no usable
template) or `llm.chat_template = "chatml"`, the prompt is written as ChatML by hand — the
format Qwen and SmolLM are trained on — and sent as a plain completion.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from ..errors import BackendError, ConfigError
from ..settings import LLMSettings
from .base import Completion, Messages, TextCallback, make_completion, one_line, yes_probability

# In-process, a long candidate list costs nothing; 50 catches "yes"/"no" even when a weak model
# would rather start with "Based" or "The".
_TOP_LOGPROBS = 50
_SEED = 42

_SERVERS: dict[str, Any] = {}
_LOAD_LOCK = threading.Lock()
_loads = 0


def load_count() -> int:
    """How many GGUF loads this process has done (one per distinct model path)."""
    return _loads


def _check_gguf(path: str) -> Path:
    # llama.cpp aborts the whole process on some unreadable files, so check before handing over.
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"llamacpp backend: GGUF model not found: {file} (set llm.gguf or PAGERAG_LLM__GGUF)")
    with file.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ConfigError(f"llamacpp backend: {file} is not a GGUF model file")
    return file.resolve()


def shared_server(path: str, threads: int, n_ctx: int) -> Any:
    """The process-wide llama.cpp server for this GGUF, loaded on first use (the first caller's
    threads and n_ctx win)."""
    global _loads
    file = _check_gguf(path)
    with _LOAD_LOCK:
        server = _SERVERS.get(str(file))
        if server is None:
            server = _SERVERS[str(file)] = _load(file, threads, n_ctx)
            _loads += 1
        return server


def _load(file: Path, threads: int, n_ctx: int) -> Any:
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(file)
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.verbosity = -1  # llama.cpp logs every request to stderr otherwise; failures still raise
    try:
        return xlc.Server(params)
    except Exception as exc:  # noqa: BLE001
        raise BackendError(f"llamacpp backend: cannot load {file.name}: {one_line(str(exc), 160)}") from None


def chatml_prompt(messages: Messages) -> str:
    turns = [f"<|im_start|>{m.get('role', 'user')}\n{m.get('content') or ''}<|im_end|>\n" for m in messages]
    return "".join(turns) + "<|im_start|>assistant\n"


class LlamaCppBackend:
    name = "llamacpp"

    def __init__(self, settings: LLMSettings) -> None:
        if not settings.gguf:
            raise ConfigError("llamacpp backend: no GGUF model configured (set llm.gguf or PAGERAG_LLM__GGUF)")
        self.path = str(_check_gguf(settings.gguf))
        self.model = Path(self.path).name
        self.threads = settings.threads
        self.n_ctx = settings.n_ctx
        self._chatml = settings.chat_template == "chatml"
        self.last_completion: Completion | None = None

    @property
    def _server(self) -> Any:
        return shared_server(self.path, self.threads, self.n_ctx)

    # ---- completion -------------------------------------------------------------------------

    def complete(
        self,
        messages: Messages,
        *,
        max_tokens: int,
        temperature: float,
        json_mode: bool = False,
        stop: list[str] | None = None,
        on_text: TextCallback | None = None,
    ) -> Completion:
        request: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "seed": _SEED}
        if stop:
            request["stop"] = list(stop)
        if json_mode:
            request["json_schema"] = {"type": "object"}  # grammar-constrained: the reply parses
        started = time.perf_counter()
        result = self._run(messages, request, on_text)
        choice = result["choices"][0]
        text = choice.get("text") if "text" in choice else (choice.get("message") or {}).get("content")
        return self._record(messages, text or "", result.get("usage") or {}, choice.get("finish_reason") or "", started)

    def _run(self, messages: Messages, request: dict[str, Any], on_text: TextCallback | None) -> dict[str, Any]:
        """One request through the chat template, or as ChatML when the template cannot be used."""
        if not self._chatml:
            try:
                return self._call("handle_chat_completions", {**request, "messages": messages}, on_text)
            except BackendError as exc:
                if "template" not in str(exc).lower():
                    raise
                self._chatml = True  # this GGUF's template is unusable: ChatML from now on
        stops = list(request.get("stop") or []) + ["<|im_end|>"]
        return self._call("handle_completions", {**request, "prompt": chatml_prompt(messages), "stop": stops}, on_text)

    def _call(self, handler: str, request: dict[str, Any], on_text: TextCallback | None) -> dict[str, Any]:
        server = self._server
        try:
            if on_text is None:
                result = getattr(server, handler)(request)
            else:
                result = self._stream(getattr(server, handler), request, on_text)
        except (ValueError, RuntimeError) as exc:
            raise BackendError(f"llamacpp backend ({self.model}): {one_line(str(exc), 200)}") from None
        if not isinstance(result, dict) or "error" in result or not result.get("choices"):
            detail = result.get("error", result) if isinstance(result, dict) else result
            message = detail.get("message", detail) if isinstance(detail, dict) else detail
            hint = " (raise llm.n_ctx)" if "context" in str(message) else ""
            raise BackendError(f"llamacpp backend ({self.model}): {one_line(str(message), 200)}{hint}")
        return result

    @staticmethod
    def _stream(handler: Any, request: dict[str, Any], on_text: TextCallback) -> dict[str, Any]:
        """Stream through llama.cpp's callback, then assemble one non-streaming-shaped result."""
        pieces: list[str] = []
        state: dict[str, Any] = {"usage": None, "finish": "", "error": None}

        def on_chunk(chunk: dict) -> None:
            if "error" in chunk:
                state["error"] = chunk["error"]
            state["usage"] = chunk.get("usage") or state["usage"]
            for choice in chunk.get("choices") or []:
                piece = choice.get("text") if "text" in choice else (choice.get("delta") or {}).get("content")
                if piece:
                    pieces.append(piece)
                    on_text(piece)
                state["finish"] = choice.get("finish_reason") or state["finish"]

        handler({**request, "stream": True, "stream_options": {"include_usage": True}}, on_chunk)
        if state["error"] is not None:
            return {"error": state["error"]}
        return {"choices": [{"text": "".join(pieces), "finish_reason": state["finish"]}], "usage": state["usage"]}

    def _record(self, messages: Messages, text: str, usage: dict, finish: str, started: float) -> Completion:
        self.last_completion = make_completion(messages, text, usage, finish, started, backend=self.name, model=self.model)
        return self.last_completion

    # ---- yes/no judge -----------------------------------------------------------------------

    def yes_no_logprob(self, prompt_messages: Messages) -> float | None:
        """P(yes) vs P(no) for the first reply token, from the model's raw next-token
        distribution (llama.cpp reports pre-sampling probabilities), summed over the spellings
        " yes", "yes", "Yes", … and normalised over the two sides."""
        candidates = self.first_token_logprobs(prompt_messages)
        return yes_probability(candidates) if candidates else None

    def first_token_logprobs(self, prompt_messages: Messages) -> list[tuple[str, float]] | None:
        """The top first reply tokens from the model's raw next-token distribution."""
        request = {"max_tokens": 1, "temperature": 0.0, "seed": _SEED,
                   "logprobs": True, "top_logprobs": _TOP_LOGPROBS, "n_probs": _TOP_LOGPROBS}
        started = time.perf_counter()
        result = self._run(prompt_messages, request, None)
        choice = result["choices"][0]
        text = choice.get("text") if "text" in choice else (choice.get("message") or {}).get("content")
        self._record(prompt_messages, text or "", result.get("usage") or {}, choice.get("finish_reason") or "", started)
        content = (choice.get("logprobs") or {}).get("content") or []
        if not content:
            return None
        first = content[0]
        candidates = [(str(c["token"]), float(c["logprob"])) for c in first.get("top_logprobs") or []]
        return candidates or [(str(first["token"]), float(first["logprob"]))]
