"""`openai` backend: the official SDK against any OpenAI-compatible endpoint (OpenAI, vLLM,
Ollama, a llama.cpp server).

The SDK does the transport work — timeouts, and bounded retries with exponential backoff on
5xx, 408/409/429 and timeouts (`llm.max_retries`). This module turns every failure into one
`BackendError` line that says what happened and where, and checks that a reply really is a
chat completion before using it (a proxy can answer 200 with an HTML page or half a body).
"""
from __future__ import annotations

import os
import time
from typing import Any, Mapping

from ..errors import BackendError
from ..settings import LLMSettings
from .base import Completion, Messages, TextCallback, make_completion, one_line, yes_probability

_LOCAL_API_KEY = "sk-local"  # local servers ignore the key, but the SDK insists on one
_TOP_LOGPROBS = 20  # OpenAI's maximum


class _MalformedReply(Exception):
    """A 200 response that is not a usable chat completion."""


class OpenAIBackend:
    name = "openai"

    def __init__(self, settings: LLMSettings, environ: Mapping[str, str] | None = None) -> None:
        from openai import OpenAI

        environ = os.environ if environ is None else environ
        self.base_url = settings.base_url or environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        api_key = settings.api_key or environ.get("OPENAI_API_KEY") or _LOCAL_API_KEY
        self.timeout_s = settings.timeout_s
        self.max_retries = settings.max_retries
        self._client = OpenAI(base_url=self.base_url, api_key=api_key,
                              timeout=settings.timeout_s, max_retries=settings.max_retries)
        self._model = settings.model
        self._logprobs_supported = True  # until the server shows otherwise
        self.last_completion: Completion | None = None

    # ---- model ------------------------------------------------------------------------------

    @property
    def model(self) -> str:
        """`llm.model`, else the first model the endpoint lists (a local server usually has one)."""
        if not self._model:
            self._model = self._first_served_model()
        return self._model

    def list_models(self) -> list[str]:
        try:
            page = self._client.models.list()
            return [str(item.id) for item in page.data]
        except Exception as exc:  # noqa: BLE001 - every failure becomes one BackendError line
            raise self._backend_error(exc, "model list request") from None

    def _first_served_model(self) -> str:
        models = self.list_models()
        if not models:
            raise BackendError(f"openai backend: {self.base_url} lists no model; set llm.model")
        return models[0]

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
        request: dict[str, Any] = {"model": self.model, "messages": messages,
                                   "max_tokens": max_tokens, "temperature": temperature}
        if stop:
            request["stop"] = stop
        if json_mode:
            request["response_format"] = {"type": "json_object"}
        started = time.perf_counter()
        try:
            if on_text is None:
                text, usage, finish = self._create(request)
            else:
                text, usage, finish = self._create_streaming(request, on_text)
        except Exception as exc:  # noqa: BLE001
            raise self._backend_error(exc, "chat completion") from None
        return self._record(messages, text, usage, finish, started)

    def _create(self, request: dict[str, Any]) -> tuple[str, Any, str]:
        response = self._client.chat.completions.create(**request)
        choice = _first_choice(response)
        return choice.message.content or "", getattr(response, "usage", None), choice.finish_reason or ""

    def _create_streaming(self, request: dict[str, Any], on_text: TextCallback) -> tuple[str, Any, str]:
        stream = self._client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True})
        pieces: list[str] = []
        usage, finish = None, ""
        for chunk in stream:
            usage = getattr(chunk, "usage", None) or usage
            for choice in getattr(chunk, "choices", None) or []:
                delta = choice.delta.content if choice.delta is not None else None
                if delta:
                    pieces.append(delta)
                    on_text(delta)
                finish = choice.finish_reason or finish
        return "".join(pieces), usage, finish

    def _record(self, messages: Messages, text: str, usage: Any, finish: str, started: float) -> Completion:
        self.last_completion = make_completion(messages, text, usage, finish, started, backend=self.name, model=self.model)
        return self.last_completion

    # ---- yes/no judge -----------------------------------------------------------------------

    def yes_no_logprob(self, prompt_messages: Messages) -> float | None:
        """P(yes) from the top-20 log-probabilities of one generated token; None when the server
        rejects or ignores `logprobs` (remembered, so it is asked only once)."""
        candidates = self.first_token_logprobs(prompt_messages)
        return yes_probability(candidates) if candidates else None

    def first_token_logprobs(self, prompt_messages: Messages) -> list[tuple[str, float]] | None:
        """The top-20 first reply tokens; None when the server rejects or ignores `logprobs`
        (remembered, so it is asked only once)."""
        self.last_completion = None
        if not self._logprobs_supported:
            return None
        import openai

        request = {"model": self.model, "messages": prompt_messages, "max_tokens": 1, "temperature": 0.0,
                   "logprobs": True, "top_logprobs": _TOP_LOGPROBS}
        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(**request)
            choice = _first_choice(response)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
            if "logprob" not in _server_message(exc).lower():
                raise self._backend_error(exc, "log-probability request") from None
            self._logprobs_supported = False  # the server does not take `logprobs`
            return None
        except Exception as exc:  # noqa: BLE001
            raise self._backend_error(exc, "log-probability request") from None
        self._record(prompt_messages, choice.message.content or "", getattr(response, "usage", None),
                     choice.finish_reason or "", started)
        candidates = _first_token_candidates(choice)
        if not candidates:
            self._logprobs_supported = False  # the server ignored `logprobs`
            return None
        return list(candidates.items())

    # ---- errors -----------------------------------------------------------------------------

    def _backend_error(self, exc: Exception, what: str) -> BackendError:
        """One line that says what failed, where, and after how many attempts."""
        import openai

        where = f"openai backend ({self.base_url})"
        attempts = f"after {self.max_retries + 1} attempt{'s' if self.max_retries else ''}"
        if isinstance(exc, BackendError):
            return exc
        if isinstance(exc, openai.APITimeoutError):
            return BackendError(f"{where}: no answer to the {what} within llm.timeout_s = {self.timeout_s:g} s, "
                                f"{attempts}; the server is down or too slow")
        if isinstance(exc, openai.APIConnectionError):
            cause = one_line(str(exc.__cause__ or exc), 120)
            return BackendError(f"{where}: cannot connect ({cause}), {attempts}; is the server running?")
        if isinstance(exc, openai.APIStatusError):
            retried = f" {attempts}" if exc.status_code >= 500 or exc.status_code in (408, 409, 429) else ""
            return BackendError(f"{where}: HTTP {exc.status_code} to the {what}{retried}: {_server_message(exc)}")
        if isinstance(exc, (openai.APIResponseValidationError, _MalformedReply, ValueError)):
            return BackendError(f"{where}: malformed response to the {what}: {one_line(str(exc), 160)}")
        return BackendError(f"{where}: {what} failed: {type(exc).__name__}: {one_line(str(exc), 160)}")


def _first_choice(response: Any) -> Any:
    """The first choice of a chat completion, or _MalformedReply when the body is something else
    (the SDK hands back plain text for a non-JSON 200, and does not validate JSON shapes)."""
    if isinstance(response, str):
        raise _MalformedReply(f"expected JSON, got {one_line(response, 80)!r}")
    try:
        choice = response.choices[0]
        message = choice.message
        content = message.content
    except (AttributeError, IndexError, KeyError, TypeError):
        raise _MalformedReply(f"not a chat completion: {one_line(repr(response), 120)}") from None
    if content is not None and not isinstance(content, str):
        raise _MalformedReply(f"message content is {type(content).__name__}, not text")
    return choice


def _first_token_candidates(choice: Any) -> dict[str, float]:
    logprobs = getattr(choice, "logprobs", None)
    content = getattr(logprobs, "content", None) or []
    if not content:
        return {}
    first = content[0]
    candidates = {str(item.token): float(item.logprob) for item in (first.top_logprobs or [])}
    candidates.setdefault(str(first.token), float(first.logprob))
    return candidates


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        detail = body.get("error", body)
        message = detail.get("message") if isinstance(detail, dict) else detail
        if message:
            return one_line(str(message), 160)
    response = getattr(exc, "response", None)
    text = getattr(response, "text", "") if response is not None else ""
    return one_line(text or str(exc), 160)
