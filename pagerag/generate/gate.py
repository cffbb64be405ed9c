"""The RCS gate of the decision policy: how far can this retrieval be trusted, and what is tau?

The model is found in this order: `confidence.model_path`; a model calibrated for the
repository (`<repo>/rcs_model.json`, written by `pagerag calibrate`); the packaged default
(pagerag/confidence/default_rcs.json). Features come from the retrieval's Signals (hop-1 dense
cosines, hop-2 graph-expansion scores, BM25) and evidence, computed with pagerag.confidence's
own feature functions, so the gate scores exactly what the model was trained on. When no model
can be found, or the model needs a feature this pipeline does not compute, the gate is skipped
and the answer says so (a note, never a silent pass).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PageRAGError
from ..settings import Settings

REPO_MODEL = "rcs_model.json"
AGREEMENT_K = 5


@dataclass
class GateResult:
    rcs: float | None
    tau: float | None
    model: str = ""  # where the model came from
    note: str = ""  # why the gate was skipped, when it was
    features: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.rcs is None or self.tau is None or self.rcs >= self.tau


_MODELS: dict[str, object] = {}


def load_rcs_model(settings: Settings, repo_path: str | Path | None):
    """(RCSModel or None, where it came from or why there is none)."""
    from ..confidence.model import DEFAULT_MODEL_PATH, RCSModel

    candidates = []
    if settings.confidence.model_path:
        path = Path(settings.confidence.model_path).expanduser()
        if not path.is_file():
            raise PageRAGError(f"confidence.model_path: RCS model file not found: {path}")
        candidates.append(path)
    if repo_path is not None and (Path(repo_path) / REPO_MODEL).is_file():
        candidates.append(Path(repo_path) / REPO_MODEL)
    if DEFAULT_MODEL_PATH.is_file():
        candidates.append(DEFAULT_MODEL_PATH)
    if not candidates:
        return None, "no RCS model: confidence.model_path is empty, the repository has none and no default is packaged"
    path = candidates[0]
    key = f"{path.resolve()}:{path.stat().st_mtime}"
    if key not in _MODELS:
        _MODELS[key] = RCSModel.load(path)
    return _MODELS[key], str(path)


def retrieval_features(retrieval) -> dict[str, float]:
    """phi1-phi9 plus the cheap extras of pagerag.confidence.features, from one Retrieval."""
    from ..confidence.features import (compute_features, lexical_features, mention_coverage,
                                       question_mentions)

    signals = retrieval.signals
    texts = [e.text for e in retrieval.evidence]
    # k = 5 as in the calibration tables (pagerag.confidence.eval_features): agreement of the
    # dense and BM25 top-5, whatever the evidence budget
    extras = lexical_features(signals.bm25_scores, signals.hop1_ids, signals.bm25_ids, AGREEMENT_K)
    mentions = question_mentions(retrieval.question)
    heads = [" ".join(t.split()[:8]) for t in texts]
    extras["q_mentions"] = float(len(mentions))
    extras["mention_cov"] = mention_coverage(mentions, texts)[1]
    extras["mention_head_cov"] = mention_coverage(mentions, heads)[1]
    extras["n_linked"] = float(signals.n_linked)
    extras["path_found"] = float(signals.path_found)
    return compute_features(signals.hop1_scores, signals.hop2_scores, retrieval.question, extras)


def rcs_gate(retrieval, settings: Settings, repo_path: str | Path | None = None) -> GateResult:
    """RCS of the retrieval and the model's tau (see the module docstring)."""
    model, where = load_rcs_model(settings, repo_path)
    if model is None:
        return GateResult(None, None, "", f"RCS gate skipped: {where}")
    features = retrieval_features(retrieval)
    missing = [name for name in model.feature_names if name not in features]
    if missing:
        return GateResult(None, float(model.tau), where,
                          f"RCS gate skipped: the model at {where} needs feature(s) {', '.join(missing)} "
                          "that the retrieval does not provide", features)
    return GateResult(round(float(model.score(features)), 4), float(model.tau), where, "", features)
