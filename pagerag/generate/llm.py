"""LLM backends behind one small Protocol, a registry, and the records every call returns.

A backend is one file that registers a factory here (`register_backend`); `get_llm(settings)`
picks one (`auto`: an OpenAI-compatible endpoint, else a local GGUF, else None = the extractive,
no-LLM path) and wraps it in the on-disk response cache. Heavy libraries (openai, xllamacpp) are
imported only when their backend is built, so `import pagerag` stays fast.
"""
from __future__ import annotations

import importlib
import json
import math
import os
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Protocol, runtime_checkable

from ..errors import BackendError, ConfigError
from ..offline import count_tokens
from ..settings import LLMSettings

Messages = list[dict]
TextCallback = Callable[[str], None]


@dataclass(frozen=True)
class Completion:
    """One LLM reply and what it cost. Tokens come from the server's usage when it reports them,
    else from tiktoken. A cache hit keeps the tokens the original call cost, has `cached=True`
    and the latency of the cache read."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    backend: str
    model: str
    cached: bool = False
    finish_reason: str = ""


@runtime_checkable
class LLM(Protocol):
    name: str
    model: str
    # The record of the most recent call (complete or yes_no_logprob), so callers can account
    # tokens and latency for calls that return a bare probability.
    last_completion: Completion | None

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
        """The assistant's reply. `on_text` (optional) receives text pieces as they stream."""

    def yes_no_logprob(self, prompt_messages: Messages) -> float | None:
        """P(yes) from the next-token log-probabilities of yes vs no, normalised over the two;
        None when the backend cannot give log-probabilities."""


# --------------------------------------------------------------------------------------------
# Registry

BackendFactory = Callable[[LLMSettings], LLM]
_FACTORIES: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Make `llm.backend = name` build its LLM with `factory(settings)`."""
    _FACTORIES[name] = factory


def registered_backends() -> list[str]:
    return sorted(_FACTORIES)


def _lazy_factory(module: str, cls: str) -> BackendFactory:
    def build(settings: LLMSettings) -> LLM:
        return getattr(importlib.import_module(module, __package__), cls)(settings)

    return build


register_backend("openai", _lazy_factory(".backend_openai", "OpenAIBackend"))
register_backend("llamacpp", _lazy_factory(".backend_llamacpp", "LlamaCppBackend"))


def endpoint_of(settings: LLMSettings, environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return settings.base_url or environ.get("OPENAI_BASE_URL", "")


def gguf_of(settings: LLMSettings, environ: Mapping[str, str] | None = None) -> str:
    # load_settings already folds PAGERAG_LLM__GGUF into settings.gguf; reading it here too
    # covers an LLMSettings built directly in code.
    environ = os.environ if environ is None else environ
    return settings.gguf or environ.get("PAGERAG_LLM__GGUF", "")


def describe_choice(settings: LLMSettings, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(backend name, why) — what `get_llm` will build, for `pagerag doctor`."""
    endpoint, gguf = endpoint_of(settings, environ), gguf_of(settings, environ)
    if settings.backend != "auto":
        where = {"openai": f" (endpoint {endpoint or 'api.openai.com'})", "llamacpp": f" (GGUF {gguf or 'not set'})"}
        return settings.backend, f"llm.backend = {settings.backend}{where.get(settings.backend, '')}"
    if endpoint:
        source = "llm.base_url" if settings.base_url else "OPENAI_BASE_URL"
        return "openai", f"auto: an OpenAI-compatible endpoint is configured ({source} = {endpoint})"
    if gguf:
        source = "llm.gguf" if settings.gguf else "PAGERAG_LLM__GGUF"
        return "llamacpp", f"auto: a local GGUF is configured ({source} = {gguf})"
    return "extractive", (
        "auto: no endpoint (llm.base_url / OPENAI_BASE_URL) and no GGUF (llm.gguf / PAGERAG_LLM__GGUF) "
        "configured, so answers are extracted from the evidence without an LLM"
    )


def get_llm(settings: LLMSettings, environ: Mapping[str, str] | None = None) -> LLM | None:
    """The configured LLM (wrapped in the response cache when `llm.cache`), or None for the
    extractive path."""
    name, _ = describe_choice(settings, environ)
    if name == "extractive":
        return None
    if name not in _FACTORIES:
        raise ConfigError(f"unknown LLM backend '{name}' (available: {', '.join(registered_backends())}, extractive)")
    resolved = settings.model_copy(update={"base_url": endpoint_of(settings, environ), "gguf": gguf_of(settings, environ)})
    llm = _FACTORIES[name](resolved)
    if not settings.cache:
        return llm
    from .cache import CachedLLM, ResponseCache

    return CachedLLM(llm, ResponseCache(settings.cache_dir or None))


# --------------------------------------------------------------------------------------------
# Helpers shared by the backends


def count_message_tokens(messages: Messages) -> int:
    """tiktoken estimate of a chat prompt (OpenAI's rule of thumb: 3 tokens of framing per
    message plus its role and content, and 3 to prime the reply)."""
    total = 3
    for message in messages:
        total += 3 + count_tokens(str(message.get("role", ""))) + count_tokens(str(message.get("content") or ""))
    return total


def yes_probability(top_logprobs: Mapping[str, float] | Iterable[tuple[str, float]]) -> float | None:
    """Normalised P(yes) from next-token candidates, {token: logprob} or (token, logprob) pairs
    (pairs: two token ids can share one spelling).

    Token spellings differ by model (" yes", "Yes", "YES"), so every candidate that is "yes" or
    "no" once stripped and lower-cased adds its probability to that side. When only one side
    appears in the top-k, the other is given the smallest listed probability (an upper bound
    on its true mass) rather than zero, so the result is never falsely certain. None when
    neither side appears.
    """
    pairs = list(top_logprobs.items() if isinstance(top_logprobs, Mapping) else top_logprobs)
    if not pairs:
        return None
    sides = {"yes": 0.0, "no": 0.0}
    for token, logprob in pairs:
        word = token.strip().lower()
        if word in sides:
            sides[word] += math.exp(logprob)
    if sides["yes"] == 0.0 and sides["no"] == 0.0:
        return None
    floor = math.exp(min(logprob for _, logprob in pairs))
    p_yes, p_no = sides["yes"] or floor, sides["no"] or floor
    return p_yes / (p_yes + p_no)


def one_line(text: str, limit: int = 240) -> str:
    """Server messages folded to one short line, for BackendError."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# --------------------------------------------------------------------------------------------
# JSON replies


def parse_json_object(text: str, required: tuple[str, ...] = (), *, source: str = "LLM") -> dict:
    """The JSON object in a reply. Tolerates ```json fences and prose around one object (small
    models add both); anything else — no object, broken JSON, a list, missing keys — is a
    one-line BackendError."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else body[3:]
        body = body.rsplit("```", 1)[0] if "```" in body else body
        body = body.strip()
    start = body.find("{")
    if start < 0:
        raise BackendError(f"{source} returned no JSON object where JSON was asked for: {one_line(text, 120)!r}")
    try:
        value, _ = json.JSONDecoder().raw_decode(body, start)
    except json.JSONDecodeError as exc:
        raise BackendError(f"{source} returned malformed JSON ({exc.msg} at char {exc.pos}): {one_line(text, 120)!r}") from None
    missing = [key for key in required if key not in value]
    if missing:
        raise BackendError(f"{source} JSON reply lacks key(s) {', '.join(missing)}: {one_line(text, 120)!r}")
    return value


def complete_json(
    llm: LLM,
    messages: Messages,
    *,
    max_tokens: int,
    temperature: float = 0.0,
    required: tuple[str, ...] = (),
) -> tuple[dict, Completion]:
    """Ask in JSON mode and return (parsed object, completion); BackendError when the reply is
    not a JSON object with the `required` keys."""
    completion = llm.complete(messages, max_tokens=max_tokens, temperature=temperature, json_mode=True)
    source = f"{completion.backend} model {completion.model or '?'}"
    if completion.finish_reason == "length" and "}" not in completion.text:
        raise BackendError(f"{source} hit max_tokens={max_tokens} before finishing its JSON reply")
    return parse_json_object(completion.text, required, source=source), completion
