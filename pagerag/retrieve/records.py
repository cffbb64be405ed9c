"""Records of the retrieval stage: the analysis u, the plan rho(q), the evidence E and the whole
retrieval with its timings and the raw scores the RCS gate reads.

They are plain dataclasses like pagerag/records.py (kept here to avoid edit collisions; they may
move there). `to_dict()` gives the JSON shown by `pagerag retrieve --json`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

NEEDS = ("local", "relational", "multi-hop", "global")
GRAPH_OPERATORS = ("neighbour", "path", "community")
OPERATORS = ("text", *GRAPH_OPERATORS, "rerank")


@dataclass
class EntityLink:
    """A question mention linked to a graph entity. `method`: exact | alias | fuzzy | embedding."""

    mention: str
    start: int  # character offsets of the mention in the question
    end: int
    entity_id: str
    name: str
    method: str
    score: float  # in [0, 1]: match quality times how specific the entity is


@dataclass
class Analysis:
    """u = Psi(q, R): who the question is about and what kind of evidence it needs."""

    question: str
    links: list[EntityLink] = field(default_factory=list)
    need: str = "local"
    decided_by: str = "prototype"  # rules | prototype | llm
    reason: str = ""
    need_scores: dict[str, float] = field(default_factory=dict)  # prototype similarities per need
    mentions: list[str] = field(default_factory=list)  # candidate mention spans of the question
    notes: list[str] = field(default_factory=list)

    @property
    def entity_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for link in self.links:
            seen.setdefault(link.entity_id, None)
        return list(seen)


@dataclass
class Plan:
    """rho(q): which operators run, in what order, and each one's share of the budget B."""

    need: str
    operators: list[str]  # in run order; "rerank" last when present
    shares: dict[str, float]  # evidence-budget share per evidence-producing operator (sums to 1)
    budget_tokens: int
    graph: str  # governed | raw | none
    floor: bool
    structural_guidance: bool
    max_paths: int
    max_hops: int
    max_communities: int
    top_k: int
    reasons: list[str] = field(default_factory=list)


@dataclass
class Evidence:
    """One cited span: `text == source_text(doc_id)[start:end]` always (it is checked)."""

    passage_id: str
    doc_id: str
    file: str
    start: int
    end: int
    text: str
    n_tokens: int
    operators: list[str]
    scores: dict[str, float]
    rank: int = 0
    paths: list[str] = field(default_factory=list)  # path descriptions this passage supports
    communities: list[str] = field(default_factory=list)  # community ids it was picked for
    trimmed: bool = False  # True when only part of the passage fitted the budget


@dataclass
class Hint:
    """Structural guidance shown beside the evidence: a path or a community summary."""

    kind: str  # path | community
    text: str
    score: float
    passage_ids: list[str] = field(default_factory=list)


@dataclass
class Signals:
    """Raw material for the RCS gate (pagerag/confidence): float64 score lists, best first."""

    hop1_scores: list[float]  # dense cosine of the text-floor top-50
    hop1_ids: list[str]
    hop2_scores: list[float]  # graph expansion: max cosine over bridge queries, per passage
    hop2_ids: list[str]
    bm25_scores: list[float]
    bm25_ids: list[str]
    n_linked: int
    path_found: bool
    need: str
    mentions: list[str] = field(default_factory=list)


@dataclass
class Retrieval:
    question: str
    analysis: Analysis
    plan: Plan
    evidence: list[Evidence]
    hints: list[Hint]
    signals: Signals
    timings_ms: dict[str, float]
    pool_size: int = 0  # distinct candidate passages before the budget cut

    @property
    def evidence_tokens(self) -> int:
        return sum(e.n_tokens for e in self.evidence)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "analysis": asdict(self.analysis),
            "plan": asdict(self.plan),
            "evidence": [asdict(e) for e in self.evidence],
            "hints": [asdict(h) for h in self.hints],
            "signals": asdict(self.signals),
            "timings_ms": dict(self.timings_ms),
            "pool_size": self.pool_size,
            "evidence_tokens": self.evidence_tokens,
        }
