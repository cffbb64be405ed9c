"""spaCy pipelines, loaded once per process (the one place spaCy is loaded)."""
from __future__ import annotations

import functools
from typing import Any

from ..errors import ConfigError


@functools.lru_cache(maxsize=4)
def load_spacy(model: str, disable: tuple[str, ...] = ("lemmatizer",)) -> Any:
    """The spaCy pipeline `model` without the `disable`d components; a clear ConfigError when the
    model package is not installed."""
    import spacy

    try:
        return spacy.load(model, disable=list(disable))
    except OSError:
        raise ConfigError(f"spaCy model '{model}' is not installed (pip install {model.replace('_', '-')})") from None
