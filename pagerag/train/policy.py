"""The answer-or-refuse policy of `pagerag ask`, replayed on feature tables, and its scores.

    gate      RCS of the default retrieval < tau_gate -> widen once (the `widened` variant);
              still below -> refuse (low_retrieval_confidence)
    sufficiency  P(sufficient) < tau -> refuse (insufficient_evidence)
    answer    the ranker's best sentence, quoted (extended when very short)
This is generate/decide.py's order with the same features and models; what it cannot replay
(an LLM's answer) is measured by running `ask` itself (benchmarks/book_qa.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .features import SENT_LABELS
from .stack import Example, Stack

LENIENT, STRICT = SENT_LABELS.index("lenient"), SENT_LABELS.index("strict")
LENIENT_EXT, STRICT_EXT = SENT_LABELS.index("lenient_ext"), SENT_LABELS.index("strict_ext")


@dataclass
class Operating:
    """An operating point: target CWARs of the gate and of the sufficiency model."""

    gate_cwar: float | None  # None: no gate
    suff_cwar: float
    escalate: bool = True
    extend_short: bool = True


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


def replay(stack: Stack, examples: Sequence[Example], op: Operating) -> list[Outcome]:
    tau_gate = stack.level1.rcs.tau_for(op.gate_cwar) if op.gate_cwar is not None else None
    tau = stack.suff.tau_for(op.suff_cwar)
    return [_one(stack, e, tau_gate, tau, op) for e in examples]


def _one(stack: Stack, e: Example, tau_gate: float | None, tau: float, op: Operating) -> Outcome:
    variant = "default"
    rcs = stack.level1.rcs_score(e.variants[variant])
    answerable = e.kind == "answerable"

    def out(decision: str, reason: str | None, strict=False, lenient=False, p=None) -> Outcome:
        return Outcome(e.id, e.book, e.kind, answerable, decision, reason, bool(strict), bool(lenient), rcs, p)

    if tau_gate is not None and rcs < tau_gate:
        if not op.escalate:
            return out("refused", "low_retrieval_confidence")
        variant = "widened"
        rcs = stack.level1.rcs_score(e.variants[variant])
        if rcs < tau_gate:
            return out("refused", "low_retrieval_confidence")
    p = stack.suff_score(e, variant)
    if p < tau:
        return out("refused", "insufficient_evidence", p=p)
    v = e.variants[variant]
    order, _ = stack.level1.ranked(v)
    if not len(order):
        return out("refused", "unsupported_answer", p=p)
    labels = v.sent_labels[order[0]]
    cols = (STRICT_EXT, LENIENT_EXT) if op.extend_short else (STRICT, LENIENT)
    return out("answered", None, labels[cols[0]] and answerable, labels[cols[1]] and answerable, p)


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
    """Refusal rate per example kind (answerable / masked / swapped)."""
    kinds = sorted({o.kind for o in outcomes})
    return {k: float(np.mean([o.decision == "refused" for o in outcomes if o.kind == k])) for k in kinds}
