"""spaCy pipelines, loaded once per process (the one place spaCy is loaded)."""
from __future__ import annotations

import functools
import sys
from typing import Any

from ..errors import ConfigError


@functools.lru_cache(maxsize=4)
def load_spacy(model: str, disable: tuple[str, ...] = ("lemmatizer",)) -> Any:
    """The spaCy pipeline `model` without the `disable`d components; a clear ConfigError when the
    model package is not installed."""
    spacy = _import_spacy(without_torch=not model.endswith("_trf"))
    try:
        return spacy.load(model, disable=list(disable))
    except OSError:
        raise ConfigError(f"spaCy model '{model}' is not installed (pip install {model.replace('_', '-')})") from None


def _import_spacy(without_torch: bool):
    """spaCy, imported without letting thinc import torch when torch is not loaded yet: thinc
    imports it whenever it is installed, for pipelines that need it (transformer ones, `_trf`);
    the CNN pipelines do not, and torch's import is seconds of a cold `ask`."""
    if not without_torch or "torch" in sys.modules or "spacy" in sys.modules:
        import spacy

        return spacy
    sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` now raises ImportError
    try:
        import spacy
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]  # a later import (embed.backend = torch) loads the real one
    return spacy
