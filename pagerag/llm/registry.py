"""Which LLM a run uses: a registry of backend factories and the `auto` choice.

A backend is one module that registers a factory here (`register_backend`); `get_llm(settings)`
picks one (`auto`: an OpenAI-compatible endpoint, else a local GGUF, else `extractive` = no LLM,
answers quoted from the evidence) and wraps it in the on-disk response cache. Heavy libraries
(openai, xllamacpp) are imported only when their backend is built, so `import pagerag` stays fast.
"""
from __future__ import annotations

import importlib
import os
from typing import Callable, Mapping

from ..errors import ConfigError
from ..settings import LLMSettings
from .base import LLM

EXTRACTIVE = "extractive"  # the no-LLM backend: its factory builds nothing

BackendFactory = Callable[[LLMSettings], "LLM | None"]
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


register_backend("openai", _lazy_factory(".openai_backend", "OpenAIBackend"))
register_backend("llamacpp", _lazy_factory(".llamacpp_backend", "LlamaCppBackend"))
register_backend(EXTRACTIVE, lambda settings: None)


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
    return EXTRACTIVE, (
        "auto: no endpoint (llm.base_url / OPENAI_BASE_URL) and no GGUF (llm.gguf / PAGERAG_LLM__GGUF) "
        "configured, so answers are extracted from the evidence without an LLM"
    )


def get_llm(settings: LLMSettings, environ: Mapping[str, str] | None = None) -> LLM | None:
    """The configured LLM (wrapped in the response cache when `llm.cache`), or None for the
    extractive path."""
    name, _ = describe_choice(settings, environ)
    if name not in _FACTORIES:
        raise ConfigError(f"unknown LLM backend '{name}' (available: {', '.join(registered_backends())})")
    resolved = settings.model_copy(update={"base_url": endpoint_of(settings, environ), "gguf": gguf_of(settings, environ)})
    llm = _FACTORIES[name](resolved)
    if llm is None or not settings.cache:
        return llm
    from .cache import CachedLLM, ResponseCache

    return CachedLLM(llm, ResponseCache(settings.cache_dir or None))


