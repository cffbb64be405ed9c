"""Token accounting: what each stage of a question (or a build) cost in LLM tokens and time."""
from __future__ import annotations

from typing import Callable, TypeVar

from ..records import StageCost
from .base import LLM

T = TypeVar("T")


def charged(llm: LLM, cost: StageCost, call: Callable[[], T]) -> T:
    """Run one LLM call and add what it cost (the backend's `last_completion`, when the call
    made a new one) to `cost`, also when the call fails after the model answered."""
    before = getattr(llm, "last_completion", None)
    try:
        return call()
    finally:
        after = getattr(llm, "last_completion", None)
        if after is not None and after is not before:
            cost.add(after.prompt_tokens, after.completion_tokens, after.latency_ms)
