"""The fitted models the question path ships with, loaded once per process.

    models/ranker.json           the sentence ranker (sentences.py)
    models/sufficiency.json      P(the evidence supports an answer), no LLM
    models/sufficiency_llm.json  the same with the LLM's P(yes) as one more feature
    ../confidence/book_rcs.json  the book RCS model (the gate's default, gate.py)

All are logistic models (confidence.model.RCSModel files) fitted on the 15 training books by
`python -m pagerag.train.fit --write`; each file records its training books, label, features
and the held-out curve its threshold is read from.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import PageRAGError

MODELS_DIR = Path(__file__).with_name("models")
RANKER = "ranker.json"
SUFFICIENCY = "sufficiency.json"
SUFFICIENCY_LLM = "sufficiency_llm.json"

_LOADED: dict[str, object] = {}


def load_model(path: Path):
    """An RCSModel file, cached by path and modification time."""
    from ..confidence.model import RCSModel

    if not path.is_file():
        raise PageRAGError(f"packaged model missing: {path} (fit it with `python -m pagerag.train.fit --write`)")
    key = f"{path.resolve()}:{path.stat().st_mtime}"
    if key not in _LOADED:
        _LOADED[key] = RCSModel.load(path)
    return _LOADED[key]


def packaged(name: str):
    return load_model(MODELS_DIR / name)


def book_rcs_model():
    from ..confidence.model import BOOK_MODEL_PATH

    return load_model(BOOK_MODEL_PATH)
