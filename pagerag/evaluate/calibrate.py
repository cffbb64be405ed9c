"""`pagerag calibrate`: refit the RCS gate on a user's labelled questions for one repository.

For every answerable question with evidence quotes, run the repository's retrieval, compute
the gate's own features (pagerag.generate.gate.retrieval_features, so the refitted model
scores exactly what the gate will compute), and label it 1 when every evidence quote is inside
the final evidence (quotes and passages compared after folding case, quotes and whitespace; a
quote counts as inside when one evidence passage, or the evidence joined in reading order,
contains it). Then fit_from_labelled with tau for the target CWAR, and store the model as
<repo>/rcs_model.json, which the gate prefers over the packaged default.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Sequence

from ..confidence.calibrate import fit_from_labelled
from ..confidence.model import RCSModel
from ..errors import PageRAGError


def fold(text: str) -> str:
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return re.sub(r"\s+", " ", text).strip().lower()


def load_labelled_questions(path: Path) -> list[dict]:
    """Answerable questions with evidence quotes from a JSONL file (question, evidence[, answerable])."""
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PageRAGError(f"{path}:{n}: invalid JSON: {exc.msg}") from None
        if row.get("answerable", True) and row.get("evidence") and row.get("question"):
            rows.append({"id": row.get("id", str(n)), "question": row["question"], "evidence": list(row["evidence"])})
    if not rows:
        raise PageRAGError(f"{path}: no answerable questions with an 'evidence' list of quotes to calibrate on")
    return rows


def evidence_contains_all(evidence_texts: Sequence[str], quotes: Sequence[str]) -> bool:
    """True when every quote is inside one evidence passage or the evidence joined in order."""
    texts = [fold(t) for t in evidence_texts]
    joined = " ".join(texts)
    return all(any(fold(q) in t for t in texts) or fold(q) in joined for q in quotes)


def calibrate_repository(questions_path: Path, repo: Path, target_cwar: float | None = None, settings=None,
                         progress: Callable[[int, int], None] | None = None) -> tuple[RCSModel, Path]:
    """Fit and store <repo>/rcs_model.json; returns the model and where it was written."""
    from ..api import PageRAG
    from ..generate.gate import REPO_MODEL, retrieval_features
    from ..settings import load_settings

    settings = settings or load_settings()
    target = settings.confidence.target_cwar if target_cwar is None else target_cwar
    questions = load_labelled_questions(questions_path)
    rag = PageRAG(repo, settings=settings)
    rows, labels = [], []
    for i, q in enumerate(questions, 1):
        retrieval = rag.retrieve(q["question"])
        rows.append(retrieval_features(retrieval, rag.state, rag.encode, settings.extract.spacy_model))
        labels.append(float(evidence_contains_all([e.text for e in retrieval.evidence], q["evidence"])))
        if progress:
            progress(i, len(questions))
    if len(set(labels)) < 2:
        raise PageRAGError(f"all {len(labels)} questions were {'fully' if labels[0] else 'not'} retrieved; "
                           "calibration needs both successes and failures")
    model = fit_from_labelled(rows, labels, target, prior=settings.confidence.l2_prior,
                              description={"questions": str(questions_path), "repository": str(repo),
                                           "label": "every evidence quote inside the final evidence"})
    return model, model.save(Path(repo) / REPO_MODEL)
