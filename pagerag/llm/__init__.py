"""The LLM layer: a Protocol, a registry of backends (openai, llamacpp, extractive = none), the
on-disk response cache, JSON replies, prompt rendering and token accounting. Everything that
talks to a model (build's LLM extractor, the LLM router, the judge and the answerer, the eval
judge) imports it from here; it imports nothing above settings.
"""
from .base import (LLM, Completion, Messages, TextCallback, choice_probabilities, count_message_tokens, one_line,
                   yes_probability)
from .prompts import render_prompt
from .registry import EXTRACTIVE, describe_choice, endpoint_of, get_llm, gguf_of, register_backend, registered_backends
from .replies import complete_json, parse_json_object
from .usage import StageCost, charged

__all__ = [
    "LLM", "Completion", "Messages", "TextCallback", "count_message_tokens", "one_line", "yes_probability", "choice_probabilities",
    "render_prompt", "EXTRACTIVE", "describe_choice", "endpoint_of", "get_llm", "gguf_of", "register_backend",
    "registered_backends", "complete_json", "parse_json_object", "StageCost", "charged",
]
