"""Small documents for library tests that publish many versions (adds of a few seconds each)."""
from __future__ import annotations

from pathlib import Path


def small_documents(source: Path, folder: Path, names: str = "abcd", chars: int = 6000) -> dict[str, Path]:
    """Documents `names` (a.txt, b.txt, …) of about `chars` characters each, cut from `source` at
    paragraph breaks."""
    text = source.read_text(encoding="utf-8-sig")
    out, start = {}, 0
    for name in names:
        cut = text.find("\n\n", start + chars)
        out[name] = folder / f"{name}.txt"
        out[name].write_text(text[start:cut if cut > 0 else None].strip() + "\n", encoding="utf-8")
        start = cut
    return out
