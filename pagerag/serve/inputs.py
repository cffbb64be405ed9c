"""Text a request carries, checked before the library sees it.

JSON may carry what no UTF-8 text can hold: a lone surrogate (`"\\ud800"`) decodes to a Python
string that the tokenizer, spaCy and the JSON response itself cannot encode, so it would end as
a 500 deep inside a question. Every text field a route reads passes `text_field` first: one that
is not encodable text, or holds a NUL, is the caller's mistake — a 400 with one line naming the
field and the character.
"""
from __future__ import annotations

from typing import Any, Optional

from .errors import ApiError


def text_field(name: str, value: Any) -> Any:
    """`value` unchanged when it is None or encodable text; else ApiError(400)."""
    if value is None or not isinstance(value, str):
        return value
    problem = text_problem(value)
    if problem is not None:
        raise ApiError(400, f"{name}: not valid text ({problem})")
    return value


def text_problem(value: str) -> Optional[str]:
    """What makes `value` unusable as text, or None."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate U+{ord(value[exc.start]):04X} at character {exc.start}"
    nul = value.find("\x00")
    if nul >= 0:
        return f"a NUL character at character {nul}"
    return None


def text_fields(**fields: Any) -> None:
    for name, value in fields.items():
        text_field(name, value)
