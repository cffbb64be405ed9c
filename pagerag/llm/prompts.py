"""Chat messages from the prompt templates in prompts/<name>.txt.

A template may start with a system part, separated from the user part by a line `=== user ===`.
`{name}` placeholders are filled in ONE pass over the template: a value is never scanned again,
so book text that happens to contain `{question}` reaches the model verbatim instead of being
expanded (an injection path when placeholders were replaced one after another). Braces that
name no value (JSON examples in a template) are left as they are.
"""
from __future__ import annotations

import re

from ..resources import load_prompt
from .base import Messages

USER_MARK = "=== user ==="
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def fill(template: str, values: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


def render_prompt(name: str, **values: str) -> Messages:
    """Chat messages from prompts/<name>.txt with each `{key}` replaced by values[key]."""
    template = fill(load_prompt(name), values)
    if USER_MARK in template:
        system, user = template.split(USER_MARK, 1)
        return [{"role": "system", "content": system.strip()}, {"role": "user", "content": user.strip()}]
    return [{"role": "user", "content": template.strip()}]
