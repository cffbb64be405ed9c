"""On-disk LLM response cache: a re-run (eval, calibration, a repeated question) pays no token twice.

Key = sha256 of (backend, model, kind, messages, parameters). One small JSON file per response,
written atomically (temp file + rename), so concurrent runs and a kill -9 never leave a torn
entry; an unreadable entry is treated as a miss and overwritten.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..offline import cache_root
from .base import LLM, Completion, Messages, TextCallback


def cache_key(backend: str, model: str, kind: str, payload: dict[str, Any]) -> str:
    blob = json.dumps([backend, model, kind, payload], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory) if directory else cache_root() / "llm"
        self.directory.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, value: dict[str, Any]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(value, handle, ensure_ascii=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("*/*.json"))


def _as_completion(entry: dict[str, Any] | None) -> Completion | None:
    try:
        return Completion(**entry) if entry is not None else None
    except TypeError:  # an entry written by an older version: a miss, overwritten below
        return None


class CachedLLM:
    """Any LLM, with its answers remembered on disk."""

    def __init__(self, inner: LLM, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.last_completion: Completion | None = None

    @property
    def model(self) -> str:
        return self.inner.model

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
        started = time.perf_counter()
        params = {"messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                  "json_mode": json_mode, "stop": stop or []}
        key = cache_key(self.name, self.model, "complete", params)
        hit = _as_completion(self.cache.get(key))
        if hit is not None:
            completion = replace(hit, cached=True, latency_ms=(time.perf_counter() - started) * 1000)
            if on_text is not None:
                on_text(completion.text)
            self.last_completion = completion
            return completion
        completion = self.inner.complete(messages, max_tokens=max_tokens, temperature=temperature,
                                         json_mode=json_mode, stop=stop, on_text=on_text)
        self.cache.put(key, asdict(completion))
        self.last_completion = completion
        return completion

    def yes_no_logprob(self, prompt_messages: Messages) -> float | None:
        return self._probe("yes_no", "p_yes", prompt_messages, self.inner.yes_no_logprob)

    def first_token_logprobs(self, prompt_messages: Messages) -> list[tuple[str, float]] | None:
        candidates = self._probe("first_token", "candidates", prompt_messages, self.inner.first_token_logprobs)
        return [tuple(c) for c in candidates] if candidates is not None else None  # JSON keeps pairs as lists

    def _probe(self, kind: str, field: str, prompt_messages: Messages, ask):
        """A one-token probe (yes/no, first-token log-probabilities), cached with its completion
        record so a hit still accounts its tokens."""
        started = time.perf_counter()
        key = cache_key(self.name, self.model, kind, {"messages": prompt_messages})
        hit = self.cache.get(key)
        if hit is not None and field in hit:
            record = _as_completion(hit.get("completion"))
            self.last_completion = record and replace(record, cached=True,
                                                      latency_ms=(time.perf_counter() - started) * 1000)
            return hit[field]
        value = ask(prompt_messages)
        self.last_completion = self.inner.last_completion
        record = asdict(self.last_completion) if self.last_completion is not None else None
        self.cache.put(key, {field: value, "completion": record})
        return value
