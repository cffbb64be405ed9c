"""Records that flow between stages: the contracts of the pipeline.

Every stage takes records and returns records. They are plain dataclasses so that they can be
pickled into the build cache, written to LanceDB rows (`asdict`) and printed as JSON. Keep them
small: a field belongs here only when two stages need it.

One record names a piece of book text, `Span`; every record that points into a source (a
passage, a piece of evidence, a sentence window, an excerpt shown to the LLM, a citation) *is* a
Span, so the text, its document and its offsets travel together and are checked in one place.

    build:    SourceDoc -> Passage(Span) -> Graph (Entity, Relation, Community)
    retrieve: Analysis (EntityLink) -> Plan -> Evidence(Span) + Hint + Signals = Retrieval
    generate: Window(Span) -> Excerpt(Span) -> Verdict -> Answer (Citation(Span), StageCost)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import RepositoryError
from .structure import Place, Structure


@dataclass
class SourceDoc:
    """One loaded input file.

    `text` is the decoded file with newlines normalised to "\\n" (for a PDF, EPUB, Word file or
    web page: the text read out of it, paragraphs apart by a blank line); it is stored in the
    repository (sources/<doc_id>.txt) and every offset in the repository points into it.
    `content_start` and `content_end` bound the body once a Project Gutenberg header/licence is
    stripped: the body is `text[content_start:content_end]`, so offsets stay honest without
    copying. `structure` maps the text's offsets to the file's pages and sections.
    """

    doc_id: str
    path: str
    text: str
    sha256: str  # of the raw bytes on disk
    encoding: str
    content_start: int = 0
    content_end: int | None = None  # None = end of text
    structure: Structure = field(default_factory=Structure)

    @property
    def body(self) -> str:
        return self.text[self.content_start : self.content_end]


# --------------------------------------------------------------------------------------------
# Spans of book text


@dataclass
class Span:
    """A piece of a source document: `text == source_text(doc_id)[start:end]`, inside passage
    `passage_id` of file `file`."""

    passage_id: str
    doc_id: str
    file: str
    start: int
    end: int
    text: str

    def check(self, passage: "Passage") -> None:
        """Raise unless this span lies in `passage` and its text is the passage's stored text at
        the same offsets: the source file and the passage table agree, so the quote is honest."""
        inside = passage.start <= self.start <= self.end <= passage.end
        if not inside or passage.text[self.start - passage.start : self.end - passage.start] != self.text:
            raise RepositoryError(f"{self.passage_id}[{self.start}:{self.end}] does not match the stored passage "
                                  "text; the repository is stale or damaged: rebuild it")

    def line_in(self, source: str) -> int:
        """1-based line of `start` in the source."""
        return source.count("\n", 0, self.start) + 1


# The fields that say where a span lies in the original file (structure.py): the page its start
# is on (1-based; `page_label` is the number printed on it when that differs) and the section
# path, outermost first. None / [] for a document without pages or headings (plain text).
PLACE_FIELDS = ("page", "page_label", "section")


def set_place(span: Any, place: Place) -> Any:
    """`span` with its page and section from `place` (the structure map's look-up of its start)."""
    span.page, span.page_label, span.section = place.page, place.page_label, list(place.section)
    return span


@dataclass
class Passage(Span):
    """A token window of a source: the textual floor. It never runs across a section boundary,
    so its section is the section of all of it."""

    n_tokens: int
    ordinal: int  # position of the passage in its document
    page: int | None = None
    page_label: str | None = None
    section: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# The graph view G(D)

@dataclass
class Entity:
    entity_id: str
    name: str
    type: str
    aliases: list[str] = field(default_factory=list)
    mentions: int = 0
    passage_ids: list[str] = field(default_factory=list)
    description: str = ""


@dataclass
class Relation:
    """An edge of the graph. `kind` is "cooccurs" (same sentence) or "svo" (parsed triple)."""

    relation_id: str
    source: str  # entity_id
    target: str  # entity_id
    label: str
    kind: str
    weight: float
    passage_ids: list[str] = field(default_factory=list)
    # evidence sentences as [passage_id, start, end] spans into the source text
    evidence: list[list[Any]] = field(default_factory=list)


@dataclass
class Community:
    community_id: str
    level: int
    parent: str | None
    entity_ids: list[str] = field(default_factory=list)
    passage_ids: list[str] = field(default_factory=list)
    title: str = ""
    summary: str = ""


@dataclass
class Graph:
    """Entities + relations + communities: the graph view G(D) of the paper."""

    entities: list[Entity] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    communities: list[Community] = field(default_factory=list)

    def stats(self) -> dict[str, int]:
        linked = {r.source for r in self.relations} | {r.target for r in self.relations}
        return {
            "entities": len(self.entities),
            "relations": len(self.relations),
            "communities": len(self.communities),
            "isolated": sum(1 for e in self.entities if e.entity_id not in linked),
        }


@dataclass
class StageCost:
    """What one stage of a question cost: LLM tokens and wall time."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0

    def add(self, prompt: int, completion: int, latency_ms: float) -> None:
        self.prompt_tokens += int(prompt)
        self.completion_tokens += int(completion)
        self.latency_ms += float(latency_ms)


# --------------------------------------------------------------------------------------------
# Retrieval: the analysis u, the plan rho(q), the evidence E

NEEDS = ("local", "relational", "multi-hop", "global")
GRAPH_OPERATORS = ("neighbour", "path", "community", "ppr")
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
    decided_by: str = "classifier"  # classifier | llm
    reason: str = ""
    # the need classifier's probabilities of local / complex / global (retrieve/need.py)
    need_scores: dict[str, float] = field(default_factory=dict)
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
    """rho(q): which operators run, in what order, under what budget B. Their candidates form
    one pool that one ranker orders (no operator has a reserved share of B)."""

    need: str
    operators: list[str]  # in run order; "rerank" last when present
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
class Evidence(Span):
    """One span of the evidence E: a passage, or the part of it that fitted the budget."""

    n_tokens: int
    operators: list[str]
    scores: dict[str, float]
    rank: int = 0
    paths: list[str] = field(default_factory=list)  # path descriptions this passage supports
    communities: list[str] = field(default_factory=list)  # community ids it was picked for
    trimmed: bool = False  # True when only part of the passage fitted the budget
    entities: list[str] = field(default_factory=list)  # graph entities that led the PPR walk here
    page: int | None = None
    page_label: str | None = None
    section: list[str] = field(default_factory=list)


@dataclass
class Hint:
    """Structural guidance shown beside the evidence: a path statement, a community summary, or
    a key point of the global map-reduce. Never cited itself: `passage_ids` are the passages it
    came from, the only way it can be cited."""

    kind: str  # path | community | point
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
    llm_cost: StageCost = field(default_factory=StageCost)  # LLM tokens of retrieval: the router, the global map step
    # what the graph added, as numbers a decision model can read (api.graph_features)
    graph_features: dict[str, float] = field(default_factory=dict)

    @property
    def evidence_tokens(self) -> int:
        return sum(e.n_tokens for e in self.evidence)

    def budget_use(self) -> dict[str, float]:
        """Per operator, the share of the budget B filled by evidence it proposed. No operator has
        a reserved share; this is what each one won in the pool (a passage proposed by several
        operators counts for each, so the shares may sum past the total)."""
        budget = max(1, self.plan.budget_tokens)
        use: dict[str, float] = {}
        for e in self.evidence:
            for op in e.operators:
                use[op] = use.get(op, 0.0) + e.n_tokens / budget
        return {op: round(share, 4) for op, share in sorted(use.items(), key=lambda kv: -kv[1])}

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
            "graph_features": dict(self.graph_features),
            "tokens": {"prompt": self.llm_cost.prompt_tokens, "completion": self.llm_cost.completion_tokens},
            "evidence_tokens": self.evidence_tokens,
            "budget_use": self.budget_use(),
        }


# --------------------------------------------------------------------------------------------
# Generation: what the judge and the answerer read, and the answer

# Why an answer was refused (the `reason` field).
LOW_CONFIDENCE = "low_retrieval_confidence"
INSUFFICIENT = "insufficient_evidence"
UNSUPPORTED = "unsupported_answer"
REFUSAL_REASONS = (LOW_CONFIDENCE, INSUFFICIENT, UNSUPPORTED)
# what an answer is: one the policy checked, or (offline, generate.offline = closest) the passage
# the reader ranks closest, which nothing could check answers the question
CHECKED, CLOSEST = "answer", "closest_passage"
CLOSEST_CAVEAT = "offline, the reader cannot check that it answers the question"


@dataclass
class Window(Span):
    """Consecutive whole sentences of one passage (the unit the rerank and the judge score)."""

    sentences: list[tuple[int, int]] = field(default_factory=list)  # absolute spans of its sentences
    score: float = 0.0


@dataclass
class Excerpt(Span):
    """A numbered piece of evidence shown to the judge and the answerer: `[n]` in an answer
    cites it."""

    n: int = 0
    n_tokens: int = 0
    line: int = 0  # 1-based line of `start` in the source file
    score: float = 0.0  # how well it matches the question (for ordering)
    page: int | None = None
    page_label: str | None = None
    section: list[str] = field(default_factory=list)


@dataclass
class Citation(Span):
    """An excerpt an answer cites: the quote is its text, exact to the source."""

    n: int = 0
    line: int = 0
    page: int | None = None
    page_label: str | None = None
    section: list[str] = field(default_factory=list)

    @property
    def quote(self) -> str:
        return self.text

    @classmethod
    def of(cls, excerpt: Excerpt) -> "Citation":
        return cls(excerpt.passage_id, excerpt.doc_id, excerpt.file, excerpt.start, excerpt.end, excerpt.text,
                   excerpt.n, excerpt.line, excerpt.page, excerpt.page_label, list(excerpt.section))

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "passage_id": self.passage_id, "file": self.file, "start": self.start, "end": self.end,
                "quote": self.text, "line": self.line, "page": self.page, "page_label": self.page_label,
                "section": list(self.section)}


@dataclass
class Verdict:
    """s(q, E): does the evidence support an answer? `method`: model (the fitted sufficiency
    model) | llm-pick (the LLM names the sentence that states the answer, excerpt by excerpt, its
    threshold calibrated on pairs for this LLM) | llm-pick (packaged threshold) | llm-windows (the
    yes/no judge, calibrated) | llm-windows (uncalibrated) | skipped."""

    sufficient: bool
    method: str
    missing: str = ""  # what the evidence lacks, in words, when insufficient
    score: float | None = None  # the model's P(sufficient)
    detail: str = ""


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
    # what the reader (pagerag.read) said of its best sentence: P(it states the answer), the
    # answer span and its margin over "no answer here"; empty when nothing was read
    reader: dict[str, Any] = field(default_factory=dict)
    # with an LLM, what it made of each excerpt it read alone: n, passage, P(yes), whether its
    # quote was found in the excerpt (generate.window_judge); empty without an LLM
    judged: list[dict[str, Any]] = field(default_factory=list)
    escalated: bool = False
    label: str = CHECKED  # CHECKED, or CLOSEST: shown as the closest passage, not as an answer
    backend: str = "extractive"
    pipeline: str = "full"
    costs: dict[str, StageCost] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def answered(self) -> bool:
        return self.decision == "answered"

    @property
    def closest(self) -> bool:
        return self.answered and self.label == CLOSEST

    @property
    def caveat(self) -> str:
        """Why a closest passage is not an answer, with its P(sufficient); "" for a checked answer."""
        if not self.closest:
            return ""
        p = self.verdict.score if self.verdict is not None else None
        return CLOSEST_CAVEAT + (f"; P(sufficient) {p:.2f}" if p is not None else "")

    @property
    def heading(self) -> str:
        """What the answer text is, as the CLI and the chat reply introduce it."""
        return f"Closest passage ({self.caveat})" if self.closest else "Answer"

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
            "label": self.label,
            "caveat": self.caveat,
            "answer": self.answer,
            "reason": self.reason,
            "citations": [c.to_dict() for c in self.citations],
            "rcs": self.rcs,
            "tau": self.tau,
            "plan": self.plan,
            "analysis": self.analysis,
            "hints": self.hints,
            "verdict": asdict(self.verdict) if self.verdict else None,
            "reader": self.reader,
            "judged": list(self.judged),
            "escalated": self.escalated,
            "backend": self.backend,
            "pipeline": self.pipeline,
            "tokens": self.tokens,
            "latency_ms": self.latency_ms,
            "notes": list(self.notes),
        }


def to_dict(record: Any) -> dict[str, Any]:
    return asdict(record)
