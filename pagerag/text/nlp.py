"""spaCy pipelines, loaded once per process (the one place spaCy is loaded)."""
from __future__ import annotations

import sys
import threading
from concurrent.futures import Future
from typing import Any

from ..errors import ConfigError


_LOADS: dict[tuple[str, tuple[str, ...]], Future] = {}
_LOADS_LOCK = threading.Lock()


def load_spacy(model: str, disable: tuple[str, ...] = ("lemmatizer",)) -> Any:
    """The spaCy pipeline `model` without the `disable`d components, loaded once per process
    (a load that `prefetch_spacy` started is waited for, not repeated); a clear ConfigError when
    the model package is not installed."""
    future, mine = _claim(model, disable)
    if mine:
        _load_into(future, model, disable)
    return future.result()


def prefetch_spacy(model: str, disable: tuple[str, ...] = ("lemmatizer",)) -> None:
    """Start loading `model` in a background thread (seconds of a cold `ask`: spaCy's import and
    the model's weights), so it overlaps opening the repository and retrieving. Only call it when
    nothing else in the process may import torch meanwhile (see _import_spacy)."""
    future, mine = _claim(model, disable)
    if mine:
        threading.Thread(target=_load_into, args=(future, model, disable), name="spacy-load", daemon=True).start()


def _claim(model: str, disable: tuple[str, ...]) -> tuple[Future, bool]:
    """The future of this load, and whether the caller must run it (nobody started it yet)."""
    with _LOADS_LOCK:
        key = (model, tuple(disable))
        if key in _LOADS:
            return _LOADS[key], False
        _LOADS[key] = Future()
        return _LOADS[key], True


def _load_into(future: Future, model: str, disable: tuple[str, ...]) -> None:
    try:
        spacy = _import_spacy(without_torch=not model.endswith("_trf"))
        try:
            future.set_result(spacy.load(model, disable=list(disable)))
        except OSError:
            raise ConfigError(f"spaCy model '{model}' is not installed (pip install {model.replace('_', '-')})") from None
    except BaseException as exc:  # handed to whoever waits for the pipeline; a later call tries again
        with _LOADS_LOCK:
            _LOADS.pop((model, tuple(disable)), None)
        future.set_exception(exc)


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
