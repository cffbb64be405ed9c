"""The decision policy: answer with citations, or refuse and say why.

    1. RCS gate: score the retrieval; if RCS < tau, widen the route once (all allowed operators,
       1.5x budget) and re-score; still below tau -> refuse `low_retrieval_confidence`.
    2. Sufficiency judge s(q, E) (sufficiency.py); insufficient -> refuse `insufficient_evidence`,
       naming what is missing.
    3. Answer from the evidence only: extractive (no LLM) or prompts/answer; every [n] must name
       an excerpt; no valid citation, or an answer whose words its cited excerpts (and the
       question) do not contain, -> refuse `unsupported_answer`.
`generate.evidence_constraint = false` (the no-evidence-constraint ablation) skips 1 and 2, and
the answer prompt then offers the model no way out; `generate.rcs_gate = off` skips 1 only.

Nothing in the book text can change these steps: the gate reads scores, the heuristic reads
words, an LLM reads the text as fenced data, and the decision to answer is taken here from
verified citations.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from ..settings import Settings
from .answer import answer_support, check_citations, llm_answer, recite
from .context import build_excerpts, evidence_windows, graph_context, make_idf, score_windows, window_vectors
from .extractive import extractive_answer
from .gate import rcs_gate
from ..llm import LLM, charged
from .sufficiency import judge_sufficiency
from .question import read_question
from ..records import INSUFFICIENT, LOW_CONFIDENCE, UNSUPPORTED, Answer, StageCost, Verdict
from .support import Support, assess

Encode = Callable[[list[str]], np.ndarray]
FIRST_EXCERPTS = 2  # the rule's best sentences always reach the LLM's excerpts


@dataclass
class Session:
    """What a question needs, loaded once: settings, repository state, encoder, LLM (or None)."""

    settings: Settings
    state: object  # pagerag.retrieve.state.RepoState
    encode: Encode
    llm: LLM | None

    @property
    def backend(self) -> str:
        return self.llm.name if self.llm is not None else "extractive"


class _Timer:
    def __init__(self, costs: dict[str, StageCost], stage: str):
        self.cost = costs.setdefault(stage, StageCost())

    def __enter__(self) -> StageCost:
        self.t = time.perf_counter()
        self.tokens_before = (self.cost.prompt_tokens, self.cost.completion_tokens)
        return self.cost

    def __exit__(self, *exc) -> None:
        # LLM stages add their own latency (from the completions); others are timed here.
        if (self.cost.prompt_tokens, self.cost.completion_tokens) == self.tokens_before:
            self.cost.latency_ms += (time.perf_counter() - self.t) * 1000


def ask(question: str, pipe: Session) -> Answer:
    """Run the policy for one question."""
    from ..retrieve.api import retrieve

    settings, cfg = pipe.settings, pipe.settings.generate
    costs: dict[str, StageCost] = {}
    with _Timer(costs, "retrieve"):
        retrieval = retrieve(question, pipe.state, settings, encode=pipe.encode, llm=pipe.llm)
    _charge_router(costs, retrieval)
    answer = Answer(question=retrieval.question, decision="answered", answer="", reason=None,
                    backend=pipe.backend, pipeline=settings.pipeline, costs=costs)
    _describe_route(answer, retrieval)
    answer.notes.extend(retrieval.analysis.notes)
    if cfg.evidence_constraint and cfg.rcs_gate != "off":
        retrieval, gate = _gate(question, retrieval, pipe, answer, costs)
        if not gate.passed:
            widened = " even after widening the route" if answer.escalated else ""
            return _refuse(answer, LOW_CONFIDENCE, f"The retrieval is not trustworthy enough to answer: its confidence "
                           f"score {gate.rcs:.2f} is below the threshold {gate.tau:.2f}{widened}.")
    with _Timer(costs, "evidence"):
        support, windows = _support(retrieval, pipe)
    excerpts = []
    if pipe.llm is not None:
        first = []
        for r in support.ranked[:FIRST_EXCERPTS]:
            if r.passes and all(r.window is not f for f in first):
                first.append(r.window)
        excerpts = build_excerpts(windows, pipe.state, cfg.context_tokens, settings.chunk.encoding, first=first)
    if cfg.evidence_constraint:
        with _Timer(costs, "judge") as cost:
            verdict = judge_sufficiency(retrieval.question, excerpts, support, pipe.llm, cfg, cost, retrieval.hints)
        answer.verdict = verdict
        if not verdict.sufficient:
            return _refuse(answer, INSUFFICIENT, f"The evidence is insufficient: {verdict.missing}.")
    else:
        answer.verdict = Verdict(True, "skipped", detail="generate.evidence_constraint = false")
    with _Timer(costs, "answer") as cost:
        return _compose(answer, support, excerpts, pipe, cost, retrieval.hints)


def _gate(question: str, retrieval, pipe: Session, answer: Answer, costs: dict[str, StageCost]):
    from ..retrieve.api import retrieve

    with _Timer(costs, "gate"):
        gate = rcs_gate(retrieval, pipe.settings, pipe.state, pipe.encode)
    if gate.note:
        answer.notes.append(gate.note)
    if not gate.passed and pipe.settings.generate.escalate:
        with _Timer(costs, "escalate"):
            widened = retrieve(question, pipe.state, pipe.settings, escalate=True, encode=pipe.encode, llm=pipe.llm)
            second = rcs_gate(widened, pipe.settings, pipe.state, pipe.encode)
        _charge_router(costs, widened)
        answer.escalated = True
        answer.notes.append(f"RCS {gate.rcs:.2f} < tau {gate.tau:.2f}: route widened once, RCS now {second.rcs:.2f}")
        retrieval, gate = widened, second
        _describe_route(answer, widened)
    answer.rcs, answer.tau = gate.rcs, gate.tau
    return retrieval, gate


def _charge_router(costs: dict[str, StageCost], retrieval) -> None:
    """The LLM router's tokens (when it ran) are a stage of their own."""
    spent = retrieval.llm_cost
    if spent.prompt_tokens or spent.completion_tokens:
        costs.setdefault("route", StageCost()).add(spent.prompt_tokens, spent.completion_tokens, spent.latency_ms)


def _describe_route(answer: Answer, retrieval) -> None:
    analysis = retrieval.analysis
    answer.plan = asdict(retrieval.plan)
    answer.analysis = {"need": analysis.need, "decided_by": analysis.decided_by, "reason": analysis.reason,
                       "links": [asdict(link) for link in analysis.links]}
    answer.hints = [asdict(h) for h in retrieval.hints]


def _support(retrieval, pipe: Session) -> tuple[Support, list]:
    terms = read_question(retrieval.question)
    windows = evidence_windows(retrieval.evidence, pipe.state, pipe.settings.embed.model)
    idf = make_idf(pipe.state)
    if windows:
        qvec = np.asarray(pipe.encode([retrieval.question])[0], dtype=np.float32)
        vectors = window_vectors(windows, pipe.state, pipe.settings.embed.model, pipe.encode)
        score_windows(windows, terms, idf, qvec, vectors)
    support = assess(terms, windows, {e.passage_id: e.text for e in retrieval.evidence}, idf,
                     pipe.settings.generate.heuristic_coverage)
    return support, windows


def _compose(answer: Answer, support: Support, excerpts: list, pipe: Session, cost: StageCost, hints=()) -> Answer:
    cfg = pipe.settings.generate
    if pipe.llm is None:
        text, cited = extractive_answer(support, pipe.state, pipe.settings.chunk.encoding)
        if not cited:
            return _refuse(answer, UNSUPPORTED, "No evidence sentence could be quoted as an answer.")
        checked = check_citations(text, cited)
    else:
        if not excerpts:
            return _refuse(answer, UNSUPPORTED, "No evidence was retrieved, so no answer can be cited.")
        context = graph_context(hints, excerpts, cfg.graph_context_tokens) if cfg.graph_context else ""
        checked, _ = charged(pipe.llm, cost, lambda: llm_answer(
            pipe.llm, answer.question, excerpts, max_tokens=cfg.answer_max_tokens,
            temperature=pipe.settings.llm.temperature, allow_refusal=cfg.evidence_constraint and cfg.answer_may_abstain,
            graph_context=context))
        if checked.abstained:
            return _refuse(answer, INSUFFICIENT, "The evidence is insufficient: the answerer found no statement of the "
                           "answer in the excerpts.")
    if checked.invalid:
        answer.notes.append(f"citation(s) {checked.invalid} name no excerpt and were removed")
    if not checked.citations and excerpts and cfg.attribute_uncited:
        # a small model often forgets the [n]: cite the shown excerpt that bears the answer out
        checked.citations = recite(checked.text, excerpts, answer.question, cfg.min_answer_support)
        if checked.citations:
            checked.text = f"{checked.text} [{checked.citations[0].n}]"
            answer.notes.append(f"the answer cited no excerpt; excerpt [{checked.citations[0].n}] bears it out and is cited")
    if not checked.citations:
        return _refuse(answer, UNSUPPORTED, "The answer cited no evidence excerpt, so it cannot be trusted.")
    support_share = answer_support(checked.text, checked.citations, answer.question)
    if support_share < cfg.min_answer_support and excerpts:
        # a small model often cites the wrong number: when another shown excerpt bears the
        # answer out, cite that one instead (and say so)
        better = recite(checked.text, excerpts, answer.question, cfg.min_answer_support)
        if better:
            answer.notes.append(f"citation(s) {[c.n for c in checked.citations]} did not bear the answer out; "
                                f"cited {[c.n for c in better]} instead")
            checked.citations, support_share = better, answer_support(checked.text, better, answer.question)
    if support_share < cfg.min_answer_support:
        return _refuse(answer, UNSUPPORTED, f"The answer is not borne out by the excerpts it cites (only "
                       f"{support_share:.0%} of its words are in them or in the question).")
    for citation in checked.citations:  # the one check of a quote: against the stored passage
        citation.check(pipe.state.passage(citation.passage_id))
    answer.answer, answer.citations = checked.text, checked.citations
    return answer


def _refuse(answer: Answer, reason: str, message: str) -> Answer:
    answer.decision, answer.reason, answer.answer, answer.citations = "refused", reason, message, []
    return answer
