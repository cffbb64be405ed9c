"""The LLM contract: one small Protocol every backend implements, the Completion record every
call returns, and the helpers the backends share (one way to build a Completion, token estimates,
yes/no probabilities). Backends live beside this file and are chosen by registry.py.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Protocol, runtime_checkable

from ..offline import count_tokens

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

    def first_token_logprobs(self, prompt_messages: Messages) -> list[tuple[str, float]] | None:
        """The likeliest first reply tokens and their log-probabilities (one token generated, at
        temperature 0); None when the backend cannot give log-probabilities."""


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
    sides = _choice_masses(pairs, ("yes", "no"))
    if sides["yes"] == 0.0 and sides["no"] == 0.0:
        return None
    floor = math.exp(min(logprob for _, logprob in pairs))
    p_yes, p_no = sides["yes"] or floor, sides["no"] or floor
    return p_yes / (p_yes + p_no)


def choice_probabilities(candidates: Iterable[tuple[str, float]], choices: Iterable[str]) -> dict[str, float] | None:
    """P of each choice (a digit, say) as the first reply token, from (token, logprob)
    candidates: spellings that are the choice once stripped and lower-cased add up, and the
    choices are normalised over themselves (a choice not among the candidates gets 0). None when
    no choice appears."""
    mass = _choice_masses(candidates, choices)
    total = sum(mass.values())
    return {choice: p / total for choice, p in mass.items()} if total > 0 else None


def _choice_masses(candidates: Iterable[tuple[str, float]], choices: Iterable[str]) -> dict[str, float]:
    """The probability of each choice, summed over the candidate spellings that are it once
    stripped and lower-cased (" yes", "Yes", "YES" are all "yes")."""
    mass = {choice.lower(): 0.0 for choice in choices}
    for token, logprob in candidates:
        word = token.strip().lower()
        if word in mass:
            mass[word] += math.exp(logprob)
    return mass


def one_line(text: str, limit: int = 240) -> str:
    """Server messages folded to one short line, for BackendError."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def make_completion(messages: Messages, text: str, usage: Any, finish: str, started: float, *,
                    backend: str, model: str) -> Completion:
    """The Completion of one call: tokens from the server's usage (an object or a dict) when it
    reports them, else tiktoken estimates; latency since `started` (time.perf_counter())."""
    def reported(key: str):
        value = usage.get(key) if isinstance(usage, Mapping) else getattr(usage, key, None)
        return int(value) if value else None

    return Completion(
        text=text,
        prompt_tokens=reported("prompt_tokens") or count_message_tokens(messages),
        completion_tokens=reported("completion_tokens") if reported("completion_tokens") is not None else count_tokens(text),
        latency_ms=(time.perf_counter() - started) * 1000,
        backend=backend,
        model=model,
        finish_reason=finish,
    )
