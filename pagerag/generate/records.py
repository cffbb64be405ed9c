"""Records of the generation stage: the numbered excerpts an answer may cite, the judge's
verdict, the decision, and the final Answer with what each stage cost.

`Answer.to_dict()` is the object `pagerag ask --json` prints.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Why an answer was refused (the `reason` field).
LOW_CONFIDENCE = "low_retrieval_confidence"
INSUFFICIENT = "insufficient_evidence"
UNSUPPORTED = "unsupported_answer"
REFUSAL_REASONS = (LOW_CONFIDENCE, INSUFFICIENT, UNSUPPORTED)


@dataclass
class Excerpt:
    """A numbered piece of evidence shown to the judge and the answerer: `[n]` in an answer
    cites it. `text == source_text(doc_id)[start:end]` (checked when built)."""

    n: int
    passage_id: str
    doc_id: str
    file: str
    start: int
    end: int
    text: str
    n_tokens: int
    line: int  # 1-based line of `start` in the source file
    score: float = 0.0  # how well it matches the question (for ordering)


@dataclass
class Citation:
    n: int
    passage_id: str
    file: str
    start: int
    end: int
    quote: str
    line: int

    @classmethod
    def of(cls, excerpt: Excerpt) -> "Citation":
        return cls(excerpt.n, excerpt.passage_id, excerpt.file, excerpt.start, excerpt.end, excerpt.text, excerpt.line)


@dataclass
class Verdict:
    """s(q, E): is the evidence sufficient? `method`: logprob | json | heuristic | skipped."""

    sufficient: bool
    method: str
    missing: str = ""  # what the evidence lacks, in words, when insufficient
    score: float | None = None  # P(yes) for logprob, the support score for heuristic
    detail: str = ""
    rule: bool | None = None  # what the no-LLM rule said (also recorded beside an LLM judge)


@dataclass
class StageCost:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0

    def add(self, prompt: int, completion: int, latency_ms: float) -> None:
        self.prompt_tokens += int(prompt)
        self.completion_tokens += int(completion)
        self.latency_ms += float(latency_ms)


@dataclass
class Answer:
    question: str
    decision: str  # answered | refused
    answer: str  # the answer text; for a refusal, the sentence that says why
    reason: str | None  # None when answered, else one of REFUSAL_REASONS
    citations: list[Citation] = field(default_factory=list)
    rcs: float | None = None
    tau: float | None = None
    plan: dict[str, Any] = field(default_factory=dict)
    # who the question is about and what it needs (links, need), and the graph paths and
    # community summaries the retrieval found: what a reader needs to see why this evidence
    analysis: dict[str, Any] = field(default_factory=dict)
    hints: list[dict[str, Any]] = field(default_factory=list)
    verdict: Verdict | None = None
    escalated: bool = False
    backend: str = "extractive"
    pipeline: str = "full"
    costs: dict[str, StageCost] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return self.decision == "answered"

    @property
    def tokens(self) -> dict[str, dict[str, int]]:
        return {stage: {"prompt": c.prompt_tokens, "completion": c.completion_tokens} for stage, c in self.costs.items()}

    @property
    def latency_ms(self) -> dict[str, float]:
        return {stage: round(c.latency_ms, 1) for stage, c in self.costs.items()}

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.costs.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "decision": self.decision,
            "answer": self.answer,
            "reason": self.reason,
            "citations": [
                {"n": c.n, "passage_id": c.passage_id, "file": c.file, "start": c.start, "end": c.end,
                 "quote": c.quote, "line": c.line}
                for c in self.citations
            ],
            "rcs": self.rcs,
            "tau": self.tau,
            "plan": self.plan,
            "analysis": self.analysis,
            "hints": self.hints,
            "verdict": asdict(self.verdict) if self.verdict else None,
            "escalated": self.escalated,
            "backend": self.backend,
            "pipeline": self.pipeline,
            "tokens": self.tokens,
            "latency_ms": self.latency_ms,
            "notes": list(self.notes),
        }
