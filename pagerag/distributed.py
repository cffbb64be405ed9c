"""The text stages on a Ray cluster (`--executor ray`): imported only then, so the local path
never imports ray (`pip install "pagerag[ray]"` brings it)."""
from __future__ import annotations


def ray_text_stages(docs, settings, progress, timings, with_mentions: bool, address: str | None = None):
    raise NotImplementedError
