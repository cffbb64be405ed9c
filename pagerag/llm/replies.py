"""JSON replies: find the one object a model was asked for, tolerating what small models add."""
from __future__ import annotations

import json

from ..errors import BackendError
from .base import LLM, Completion, Messages, one_line


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
