"""The answer-or-refuse policy of `pagerag ask`, replayed on feature tables, and its scores.

    gate      RCS of the default retrieval < tau_gate -> widen once (the `widened` variant);
              still below -> refuse (low_retrieval_confidence)
    sufficiency  P(sufficient) < tau -> refuse (insufficient_evidence)
    answer    the reader's best sentence: its answer span when the span's margin reaches
              `span_margin`, else the sentence quoted (extended when very short)
This is generate/decide.py's order with the same features and models; what it cannot replay
(an LLM's answer) is measured by running `ask` itself (benchmarks/book_qa.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .features import SENT_LABELS
from ..generate.sentences import chooser_scores
from .stack import USED_SENTENCE_FEATURES, Example, Scores

STRICT_EXT, LENIENT_EXT = SENT_LABELS.index("strict_ext"), SENT_LABELS.index("lenient_ext")


@dataclass(frozen=True)
class Operating:
    """An operating point: target CWARs of the gate and of the sufficiency model, and the span
    margin above which the extractive answer is the reader's span rather than its sentence."""

    gate_cwar: float | None  # None: no gate
    suff_cwar: float
    escalate: bool = True
    span_margin: float = 0.0


@dataclass
class Outcome:
    id: str
    book: str
    kind: str
    answerable: bool
    decision: str  # answered | refused
    reason: str | None
    strict: bool
    lenient: bool
    rcs: float
    p: float | None
    question_set: str = ""  # written | graphrag


def replay(examples: Sequence[Example], scores: Scores, tau_gate: float | None, tau: float, op: Operating,
           chooser: dict | None = None) -> list[Outcome]:
    """Each example decided with the given scores and thresholds (the answer quoted is the
    chooser's sentence: pagerag.generate.sentences.answer_first)."""
    return [_one(e, scores, tau_gate, tau, op, chooser) for e in examples]


def _one(e: Example, scores: Scores, tau_gate: float | None, tau: float, op: Operating,
         chooser: dict | None = None) -> Outcome:
    variant = "default"
    rcs, p = scores[(e.id, variant)]

    def out(decision: str, reason: str | None, strict=False, lenient=False, p=None) -> Outcome:
        return Outcome(e.id, e.book, e.kind, e.answerable, decision, reason, bool(strict), bool(lenient), rcs, p,
                       e.question_set)

    if tau_gate is not None and rcs < tau_gate:
        if not op.escalate:
            return out("refused", "low_retrieval_confidence")
        variant = "widened"
        rcs, p = scores[(e.id, variant)]
        if rcs < tau_gate:
            return out("refused", "low_retrieval_confidence")
    if p < tau:
        return out("refused", "insufficient_evidence", p=p)
    strict, lenient = answer_quality(e, variant, op.span_margin, chooser)
    if strict is None:
        return out("refused", "unsupported_answer", p=p)
    return out("answered", None, strict and e.answerable, lenient and e.answerable, p)


def answer_quality(e: Example, variant: str, span_margin: float,
                   chooser: dict | None = None) -> tuple[bool | None, bool | None]:
    """(strict, lenient) of the extractive answer: the chooser's sentence (without one, the
    reader's best), as its span or quoted."""
    v = e.variants[variant]
    p = v.reads["p"]
    n = min(p.size, v.sent_labels.shape[0])
    if not n:
        return None, None
    lex, dense = v.sents[:n, USED_SENTENCE_FEATURES.index("lex")], v.sents[:n, USED_SENTENCE_FEATURES.index("dense")]
    best = int(np.argmax(chooser_scores(chooser, p[:n], lex, dense)))
    if v.reads["margin"][best] >= span_margin:
        return bool(v.reads["span_strict"][best]), bool(v.reads["span_lenient"][best])
    return bool(v.sent_labels[best, STRICT_EXT]), bool(v.sent_labels[best, LENIENT_EXT])


def scores(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """Correct refusal (unanswerable refused), false refusal (answerable refused), strict and
    lenient accuracy over the answerable, BBS = 2 * lenient * refusal / (lenient + refusal)."""
    ans = [o for o in outcomes if o.answerable]
    una = [o for o in outcomes if not o.answerable]
    ref = float(np.mean([o.decision == "refused" for o in una])) if una else float("nan")
    false_ref = float(np.mean([o.decision == "refused" for o in ans])) if ans else float("nan")
    strict = float(np.mean([o.strict for o in ans])) if ans else float("nan")
    lenient = float(np.mean([o.lenient for o in ans])) if ans else float("nan")
    bbs = 2 * lenient * ref / (lenient + ref) if ans and una and lenient + ref > 0 else float("nan")
    return {"n": len(outcomes), "answerable": len(ans), "unanswerable": len(una), "correct_refusal": ref,
            "false_refusal": false_ref, "strict": strict, "lenient": lenient, "bbs": bbs}


def by_kind(outcomes: Sequence[Outcome]) -> dict[str, float]:
    """Refusal rate per example kind (answerable / masked / swapped / borrowed / written)."""
    kinds = sorted({o.kind for o in outcomes})
    return {k: float(np.mean([o.decision == "refused" for o in outcomes if o.kind == k])) for k in kinds}
