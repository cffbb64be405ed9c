"""The fitted models the question path ships with, loaded once per process, and the decisions
fitted for a user's LLM.

    models/sufficiency.json      P(the evidence supports an answer) from the reader's scores
    models/pick_decision.json    the pick judge's score and threshold (generate.judge = pick)
    ../confidence/book_rcs.json  the book RCS model (the gate's default, gate.py)
    ../read/model/               the reader itself (pagerag.read)
    <cache>/calibration/<backend>-<model>.<pick|windows>.json   the pick or yes/no judge's threshold
                                 for one LLM, fitted on training-book pairs by `pagerag calibrate --llm BACKEND`

All are logistic models (confidence.model.RCSModel files) fitted on the 15 training books (`python
-m pagerag.train.fit --write`; the LLM decision on the packaged calibration sample of them); each
file records its training books, label, features and the held-out curve its threshold is read
from. models/calibration_pairs.jsonl.gz is the pair sample the LLM judge is calibrated on.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import PageRAGError

MODELS_DIR = Path(__file__).with_name("models")
SUFFICIENCY = "sufficiency.json"
CALIBRATION_SAMPLE = MODELS_DIR / "calibration_pairs.jsonl.gz"
PICK_DECISION = "pick_decision.json"

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


def pick_decision() -> dict:
    """The pick judge's score and threshold (models/pick_decision.json, fitted on training pairs
    by `benchmarks/pair_pick.py fit`)."""
    import json

    path = MODELS_DIR / PICK_DECISION
    if not path.is_file():
        raise PageRAGError(f"packaged model missing: {path} (fit it with `python benchmarks/pair_pick.py fit --write`)")
    return json.loads(path.read_text(encoding="utf-8"))


def llm_key(llm) -> str:
    """The file name of an LLM's decision: backend and model, as a safe slug."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{llm.name}-{llm.model}").strip("-")[:120]


DECISION_FILE = {"pick": "pick", "yesno": "windows"}  # generate.judge -> the suffix of its decision file


def llm_decision_path(llm, judge: str) -> Path:
    """Where `pagerag calibrate --llm` keeps judge `judge`'s threshold for this LLM."""
    from ..offline import cache_root

    return cache_root() / "calibration" / f"{llm_key(llm)}.{DECISION_FILE[judge]}.json"
