"""The decision policy: answer with citations, or refuse and say why.

    1. RCS gate (gate.py): the book RCS model (or a calibrated one) scores the retrieval; if
       RCS < tau, widen the route once (all allowed operators, 1.5x budget) and re-score; still
       below tau -> refuse `low_retrieval_confidence`.
    2. Sufficiency (sufficiency.py): the reader (pagerag.read) reads the evidence sentence by
       sentence (sentences.py); a fitted model gives P(the evidence supports an answer) from what
       it says, the evidence and the RCS -- with an LLM calibrated for its backend (`pagerag
       calibrate --llm`), its P(yes) is weighed with that by a model fitted for it; P < tau ->
       refuse `insufficient_evidence`, naming the weakest signal. Both taus come from held-out
       curves at the target CWARs (`generate.gate_cwar`, `generate.target_cwar`).
    3. Answer from the evidence only: extractive (the reader's answer span, or its sentence
       quoted) or prompts/answer over the excerpts the reader ranks first; every [n] must name an
       excerpt; an answer whose names and numbers its cited excerpts do not state, or whose words
       they do not bear out, -> refuse `unsupported_answer`.
Offline (no LLM), `generate.offline = closest` (the default): step 2's P is reported, not used to
refuse, and the answer is labelled the closest passage (`Answer.label`): the reader is at chance on
pairs, so it may not present a passage as a checked answer (docs/pairs.md).
`generate.evidence_constraint = false` (the no-evidence-constraint ablation) skips 1 and 2, and
the answer prompt then offers the model no way out; `generate.rcs_gate = off` skips the gate's
refusal (the RCS is still computed: the sufficiency model reads it).

Nothing in the book text can change these steps: the gate reads scores, the models read
features, an LLM reads the text as fenced data, and the decision to answer is taken here from
verified citations.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

from ..llm import LLM, charged
from ..records import CLOSEST, INSUFFICIENT, LOW_CONFIDENCE, UNSUPPORTED, Answer, StageCost, Verdict
from ..settings import Settings
from .answer import answer_support, check_citations, llm_answer, recite, ungrounded
from .context import build_excerpts, fold_space, graph_context
from .extractive import extractive_answer
from .gate import GateResult, rcs_gate
from .models import SUFFICIENCY, book_rcs_model, packaged
from .sentences import READ_LIMIT, Reading, Sentence, answer_first, read_evidence, read_sentences, window_order
from .sufficiency import aggregate, decide, evidence_level, unobserved_as_typical

Encode = Callable[[list[str]], np.ndarray]


@dataclass
class Session:
    """What a question needs, loaded once: settings, repository state, encoder, LLM (or None)."""

    settings: Settings
    state: object  # pagerag.retrieve.state.RepoState
    encode: Encode
    llm: LLM | None
    reader: object = None  # pagerag.read.Reader; None = the packaged one, loaded on first use

    def read_with(self):
        if self.reader is None:
            from ..read import packaged_reader

            self.reader = packaged_reader(self.settings.generate.reader)
        return self.reader

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


def ask(question: str, pipe: Session, exclude: set[str] | None = None, docs: list[str] | None = None) -> Answer:
    """Run the policy for one question (`exclude`: passage ids no operator may return; `docs`:
    the library's documents it is limited to)."""
    from ..retrieve.api import retrieve

    settings, cfg = pipe.settings, pipe.settings.generate
    costs: dict[str, StageCost] = {}
    with _Timer(costs, "retrieve"):
        retrieval = retrieve(question, pipe.state, settings, encode=pipe.encode, llm=pipe.llm, exclude=exclude, docs=docs)
    _charge_router(costs, retrieval)
    answer = Answer(question=retrieval.question, decision="answered", answer="", reason=None,
                    backend=pipe.backend, pipeline=settings.pipeline, costs=costs)
    _describe_route(answer, retrieval)
    answer.notes.extend(retrieval.analysis.notes)
    gate = None
    if cfg.evidence_constraint:
        retrieval, gate = _gate(question, retrieval, pipe, answer, costs, exclude, docs)
        if cfg.rcs_gate != "off" and not gate.passed:
            widened = " even after widening the route" if answer.escalated else ""
            score, threshold = distinct(gate.rcs, gate.tau)
            return _refuse(answer, LOW_CONFIDENCE, f"The retrieval is not trustworthy enough to answer: its confidence "
                           f"score {score} is below the threshold {threshold}{widened}.")
    with _Timer(costs, "evidence"):
        reading = read_evidence(retrieval.question, retrieval.evidence, pipe.state, pipe.settings.embed.model, pipe.encode)
    if pipe.llm is not None and cfg.evidence_constraint and cfg.judge in ("yesno", "pick"):
        with _Timer(costs, "judge") as cost:
            from .window_judge import judge_excerpts_of

            excerpts = judge_excerpts_of(reading, pipe.state, pipe.settings.generate.judge_windows,
                                         pipe.settings.chunk.encoding)
            if not excerpts:
                return _refuse(answer, INSUFFICIENT, "The evidence is insufficient: no evidence was retrieved.")
            if cfg.judge == "pick":
                return _llm_picks(answer, excerpts, pipe, cost)
            return _llm_reads(answer, excerpts, pipe, cost)
    with _Timer(costs, "read"):
        ranked = read_sentences(retrieval.question, reading.sentences, pipe.state, pipe.read_with())
    answer.reader = reader_summary(ranked)
    excerpts = llm_excerpts(reading, ranked, pipe) if pipe.llm is not None else []
    if cfg.evidence_constraint:
        with _Timer(costs, "judge"):
            verdict = _sufficiency(retrieval, reading, gate, pipe)
        answer.verdict = verdict
        if not verdict.sufficient and not shows_closest(pipe):
            return _refuse(answer, INSUFFICIENT, f"The evidence is insufficient: {verdict.missing}.")
    else:
        answer.verdict = Verdict(True, "skipped", detail="generate.evidence_constraint = false")
    with _Timer(costs, "answer") as cost:
        return _compose(answer, ranked, excerpts, pipe, cost, retrieval.hints)


def shows_closest(pipe: Session) -> bool:
    """Offline with `generate.offline = closest`: the reader's best passage is shown as the
    closest passage, whatever the sufficiency model says, because on pairs (the same question, a
    book that states its answer and one that does not) that model is at chance: it cannot check
    that the passage answers the question, so it neither claims an answer nor refuses one."""
    return pipe.llm is None and pipe.settings.generate.offline == "closest"


def _gate(question: str, retrieval, pipe: Session, answer: Answer, costs: dict[str, StageCost],
          exclude: set[str] | None, docs: list[str] | None = None) -> tuple[object, GateResult]:
    from ..retrieve.api import retrieve

    with _Timer(costs, "gate"):
        gate = rcs_gate(retrieval, pipe.settings, pipe.state, pipe.encode)
    if gate.note:
        answer.notes.append(gate.note)
    if pipe.settings.generate.rcs_gate != "off" and not gate.passed and pipe.settings.generate.escalate:
        with _Timer(costs, "escalate"):
            widened = retrieve(question, pipe.state, pipe.settings, escalate=True, encode=pipe.encode, llm=pipe.llm,
                               exclude=exclude, docs=docs)
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
    answer.plan = {**asdict(retrieval.plan), "budget_use": retrieval.budget_use()}
    answer.analysis = {"need": analysis.need, "decided_by": analysis.decided_by, "reason": analysis.reason,
                       "links": [asdict(link) for link in analysis.links]}
    answer.hints = [asdict(h) for h in retrieval.hints]


def read_ranked(retrieval, pipe: Session) -> tuple[Reading, list[Sentence]]:
    """The evidence read sentence by sentence: features, then the reader; the read sentences best
    first."""
    reading = read_evidence(retrieval.question, retrieval.evidence, pipe.state, pipe.settings.embed.model, pipe.encode)
    return reading, read_sentences(retrieval.question, reading.sentences, pipe.state, pipe.read_with())


def reader_summary(ranked: list[Sentence]) -> dict:
    """The reader's best sentence, for the answer record (`ask --json`)."""
    if not ranked:
        return {}
    best = ranked[0]
    w = best.window
    span = w.text[best.span[0] - w.start: best.span[1] - w.start] if best.span else ""
    return {"p": round(best.prob, 4), "margin": round(best.margin, 3), "span": span, "sentence": best.text,
            "passage_id": w.passage_id, "read": len(ranked)}


def llm_excerpts(reading: Reading, ranked: list[Sentence], pipe: Session) -> list:
    """The numbered excerpts an LLM reads: the evidence windows in the order of their best sentence
    by the reader, up to `generate.context_tokens`."""
    ordered = window_order(ranked, reading.windows)
    for rank, w in enumerate(ordered):
        w.score = float(len(ordered) - rank)  # build_excerpts takes the best-scored windows first
    return build_excerpts(ordered, pipe.state, pipe.settings.generate.context_tokens, pipe.settings.chunk.encoding)


def sufficiency_inputs(retrieval, reading: Reading, rcs: float) -> dict[str, float]:
    """The no-LLM sufficiency model's features (generate.sufficiency.aggregate), from the sentences
    the reader read (the first READ_LIMIT in evidence order, as the training tables hold them)."""
    read = reading.sentences[:READ_LIMIT]
    return aggregate([s.prob for s in read], [s.margin for s in read],
                     {**evidence_level(reading.terms, retrieval.evidence, reading.idf), **retrieval.graph_features},
                     rcs, max((s.features["dense"] for s in reading.sentences), default=0.0),
                     max((s.features["lex"] for s in reading.sentences), default=0.0))


def _sufficiency(retrieval, reading: Reading, gate: GateResult, pipe: Session) -> Verdict:
    """P(the evidence supports an answer) from the reader's model."""
    cfg = pipe.settings.generate
    rcs = float(book_rcs_model().score(gate.features))
    model = packaged(SUFFICIENCY)
    # the pipeline's allowed operators, not this question's route: the models were fitted on
    # `full`, whose routes leave out operators too, and learned what that looks like
    features = unobserved_as_typical(model, sufficiency_inputs(retrieval, reading, rcs),
                                     pipe.settings.retrieve.operators)
    return decide(model, features, model.tau_for(cfg.target_cwar), "model", book_names(retrieval))


def _llm_reads(answer: Answer, excerpts: list, pipe: Session, cost: StageCost) -> Answer:
    """The LLM reads the best excerpts one at a time (window_judge); it answers only from one it
    judged to state the answer, quoting a sentence that is really there."""
    from .window_judge import UNCALIBRATED_TAU

    decision = llm_decision(pipe.llm, "yesno")
    tau = decision["tau"] if decision else UNCALIBRATED_TAU
    feature = decision.get("feature", "max") if decision else "max"
    readings, score, best = _judge_excerpts(answer.question, excerpts, pipe, cost, tau, feature)
    answer.judged = [{"n": r.excerpt.n, "passage_id": r.excerpt.passage_id, "p_yes": round(r.p_yes, 4),
                      "quote_found": r.quote is not None if r.reply else None} for r in readings]
    shown = f"P(yes) {best.p_yes:.2f}" if feature == "max" else f"its P(yes) {best.p_yes:.2f}, {feature} {score:.2f}"
    refused = _judge_verdict(answer, score, tau, "llm-windows" if decision else "llm-windows (uncalibrated)",
                             f"no excerpt about {_about(answer)} states the answer (the best: {shown} < {tau:.2f})",
                             f"best excerpt's {shown} vs tau {tau:.2f} ({len(readings)} of {len(excerpts)} excerpts read)")
    if refused:
        return refused
    chosen = best if feature != "max" else next((r for r in readings if r.p_yes >= tau and r.quote is not None), None)
    if chosen is None or chosen.quote is None:
        return _refuse(answer, UNSUPPORTED, "The excerpt judged to state the answer does not contain the sentence the "
                       "model quoted from it (or that sentence is not about the question), so the answer cannot be "
                       "checked.")
    return _answer_from_quote(answer, chosen, pipe)


def _llm_picks(answer: Answer, excerpts: list, pipe: Session, cost: StageCost) -> Answer:
    """The LLM names, excerpt by excerpt, the numbered sentence that states the answer (or none);
    the score compares the excerpts' P(some sentence) (window_judge.pick_sentence) against the
    threshold `pagerag calibrate --llm` fitted for this LLM, else the packaged one (fitted for the
    local 1.5B: models/pick_decision.json). The answer: the model's short answer with the sentence
    that states it, from the first of the best `generate.answer_excerpts` excerpts where it checks
    out (`generate.pick_answer`), else the sentence the best excerpt named."""
    from .models import pick_decision
    from .window_judge import first_stated_answer, null_p_some, pick_score, pick_sentence

    calibrated = llm_decision(pipe.llm, "pick")
    decision = calibrated or pick_decision()
    feature, tau = decision["feature"], float(decision["tau"])
    readings = [pick_sentence(pipe.llm, answer.question, excerpt, cost) for excerpt in excerpts]
    answer.judged = [{"n": r.excerpt.n, "passage_id": r.excerpt.passage_id, "p_some": round(r.p_yes, 4),
                      "quote_found": r.quote is not None} for r in readings]
    null = null_p_some(pipe.llm, answer.question, cost) if feature == "null" else None
    score = pick_score([r.p_yes for r in readings], feature, null)
    best = max(readings, key=lambda r: r.p_yes)
    shown = f"P(some sentence) {best.p_yes:.2f}" + (f" vs {null:.2f} on a text that answers nothing"
                                                     if null is not None else "") + f", {feature} {score:.2f}"
    refused = _judge_verdict(answer, score, tau, "llm-pick" if calibrated else "llm-pick (packaged threshold)",
                             f"no sentence about {_about(answer)} was named as stating the answer (the best excerpt: "
                             f"{shown} < {tau:.2f})",
                             f"best excerpt's {shown} vs tau {tau:.2f} ({len(readings)} excerpts read)")
    if refused:
        return refused
    mode = pipe.settings.generate.pick_answer
    tries = pipe.settings.generate.answer_excerpts
    confirm_at = decision.get("confirm_at") if pipe.settings.generate.confirm_answer else None
    unconfirmed: list = []
    stated = first_stated_answer(pipe.llm, answer.question, readings, cost, tries, confirm_at, unconfirmed,
                                 anew=pipe.settings.generate.answer_anew) if mode != "off" else None
    for a in [*unconfirmed, *([stated] if stated and stated.confirmed is not None else [])]:
        answer.judged[next(i for i, r in enumerate(readings) if r is a.reading)]["confirmed"] = round(a.confirmed, 4)
    if stated is not None:  # the short answer, cited with the sentence that states it
        best = stated.reading
        best.answer, best.quote = stated.answer, stated.span
    elif mode == "require" and unconfirmed:
        said = "; ".join(f"\"{a.answer}\" ({a.confirmed:.2f})" for a in unconfirmed)
        return _refuse(answer, UNSUPPORTED, f"Read again with the sentence that states it, the model's answer was not "
                       f"confirmed: {said} < {float(confirm_at):.2f}.")
    elif mode == "require":
        return _refuse(answer, UNSUPPORTED, "The model's answer is not stated, in its words, by one sentence of the "
                       "excerpts it was asked of, so it cannot be checked.")
    elif best.quote is None:
        return _refuse(answer, UNSUPPORTED, "The sentence the model named does not bear on the question, so it cannot "
                       "be the answer.")
    return _answer_from_quote(answer, best, pipe)


def _judge_verdict(answer: Answer, score: float, tau: float, method: str, missing: str, detail: str) -> Answer | None:
    """Record an LLM judge's verdict (sufficient when score >= tau); the refusal when it is not."""
    sufficient = score >= tau
    answer.verdict = Verdict(sufficient, method, "" if sufficient else missing, round(score, 4), detail)
    return None if sufficient else _refuse(answer, INSUFFICIENT, f"The evidence is insufficient: {missing}.")


def _about(answer: Answer) -> str:
    """What a refusal may name of the question: the book's names it was linked to."""
    return ", ".join(book_names_of(answer)[:3]) or "the question's subject"


def _judge_excerpts(question: str, excerpts: list, pipe: Session, cost: StageCost, tau: float, feature: str):
    """(readings, score, best reading). `max`: quotes asked as soon as an excerpt reaches tau, and
    reading stops at a good one; otherwise every excerpt is judged first (the score compares them)
    and the best one alone is asked for its quote."""
    from .window_judge import judge_score, read_excerpt, read_excerpts

    max_tokens = pipe.settings.generate.answer_max_tokens
    if feature == "max":
        readings = read_excerpts(pipe.llm, question, excerpts, cost, tau, max_tokens)
    else:
        readings = read_excerpts(pipe.llm, question, excerpts, cost, None, max_tokens, stop_early=False)
    score = judge_score([r.p_yes for r in readings], feature)
    best = max(readings, key=lambda r: r.p_yes)
    if score >= tau and feature != "max":
        at = readings.index(best)
        best = readings[at] = read_excerpt(pipe.llm, question, best.excerpt, cost, 0.0, max_tokens, p_yes=best.p_yes)
    return readings, score, best


def _answer_from_quote(answer: Answer, chosen, pipe: Session) -> Answer:
    """The answer from a verified quote: the model's short answer when the quoted sentence bears it
    out (its names and numbers there, enough of its words), else the sentence; cited."""
    from ..records import Citation
    from .window_judge import quoted_excerpt

    cited = Citation.of(quoted_excerpt(pipe.state, chosen, pipe.settings.chunk.encoding))
    short = fold_space(chosen.answer)
    grounded = short and not ungrounded(short, [cited], answer.question) and \
        answer_support(short, [cited], answer.question) >= pipe.settings.generate.min_answer_support
    text = short if grounded else f"\u201c{fold_space(cited.text)}\u201d"
    if short and not grounded:
        answer.notes.append("the model's short answer was not borne out by its quote; the quoted sentence is the answer")
    cited.check(pipe.state.passage(cited.passage_id))
    answer.answer, answer.citations = f"{text} [{cited.n}]", [cited]
    return answer


def llm_decision(llm, judge: str) -> dict | None:
    """The threshold `pagerag calibrate --llm` fitted on pairs for judge `judge` with this backend
    and model, or None."""
    import json

    from .models import llm_decision_path

    path = llm_decision_path(llm, judge)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def book_names_of(answer: Answer) -> list[str]:
    return list(dict.fromkeys(link.get("name", "") for link in answer.analysis.get("links", []) if link.get("name")))


def book_names(retrieval) -> list[str]:
    """The names of the book's entities the question was linked to: all a refusal may repeat of
    the question (its other words are the asker's, and are not echoed back)."""
    return list(dict.fromkeys(link.name for link in retrieval.analysis.links if getattr(link, "name", "")))


def graph_context_for(hints, excerpts: list, settings: Settings) -> str:
    cfg = settings.generate
    return graph_context(hints, excerpts, cfg.graph_context_tokens, settings.chunk.encoding) if cfg.graph_context else ""


def _compose(answer: Answer, ranked: list[Sentence], excerpts: list, pipe: Session, cost: StageCost,
             hints=()) -> Answer:
    cfg = pipe.settings.generate
    if pipe.llm is None:
        chooser = packaged(SUFFICIENCY).training.get("chooser")
        text, cited = extractive_answer(answer_first(ranked, chooser), pipe.state, pipe.settings.chunk.encoding,
                                        cfg.extend_short_quotes, span_margin(cfg))
        if not cited:
            return _refuse(answer, UNSUPPORTED, "No evidence sentence could be quoted as an answer.")
        checked = check_citations(text, cited)
        if shows_closest(pipe):
            answer.label = CLOSEST
    else:
        if not excerpts:
            return _refuse(answer, UNSUPPORTED, "No evidence was retrieved, so no answer can be cited.")
        checked, _ = charged(pipe.llm, cost, lambda: llm_answer(
            pipe.llm, answer.question, excerpts, max_tokens=cfg.answer_max_tokens,
            temperature=pipe.settings.llm.temperature, allow_refusal=cfg.evidence_constraint and cfg.answer_may_abstain,
            graph_context=graph_context_for(hints, excerpts, pipe.settings)))
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
    if pipe.llm is not None:  # an extractive answer is a quote of the excerpt it cites: nothing to check
        refusal = _check_support(answer, checked, excerpts, cfg)
        if refusal is not None:
            return refusal
    for citation in checked.citations:  # the one check of a quote: against the stored passage
        citation.check(pipe.state.passage(citation.passage_id))
    answer.answer, answer.citations = checked.text, checked.citations
    return answer


def span_margin(cfg) -> float:
    """The margin above which the extractive answer is the reader's span: the setting, else the
    one chosen on the training books with the packaged sufficiency model."""
    if cfg.span_margin is not None:
        return float(cfg.span_margin)
    return float(packaged(SUFFICIENCY).training.get("operating", {}).get("span_margin", "inf"))


def _check_support(answer: Answer, checked, excerpts: list, cfg) -> Answer | None:
    """The LLM answer's names and numbers must be in the excerpts it cites (the grounding check),
    and most of its words in them or in the question; a wrong citation is moved to the shown
    excerpt that bears the answer out, when one does. A refusal, or None when the answer stands."""
    support_share = answer_support(checked.text, checked.citations, answer.question)
    missing = ungrounded(checked.text, checked.citations, answer.question)
    if (support_share < cfg.min_answer_support or missing) and excerpts:
        # a small model often cites the wrong number: when another shown excerpt bears the
        # answer out, cite that one instead (and say so)
        better = recite(checked.text, excerpts, answer.question, cfg.min_answer_support)
        if better and not ungrounded(checked.text, better, answer.question):
            answer.notes.append(f"citation(s) {[c.n for c in checked.citations]} did not bear the answer out; "
                                f"cited {[c.n for c in better]} instead")
            checked.citations = better
            support_share, missing = answer_support(checked.text, better, answer.question), []
    if missing:
        return _refuse(answer, UNSUPPORTED, f"The answer states {', '.join(repr(m) for m in missing[:3])}, which the "
                       "excerpts it cites do not.")
    if support_share < cfg.min_answer_support:
        return _refuse(answer, UNSUPPORTED, f"The answer is not borne out by the excerpts it cites (only "
                       f"{support_share:.0%} of its words are in them or in the question).")
    return None


def distinct(a: float, b: float, least: int = 2, most: int = 6) -> tuple[str, str]:
    """a and b with the fewest decimals (at least `least`) that tell them apart: "0.018 ... 0.021",
    never "0.02 is below 0.02"."""
    for digits in range(least, most + 1):
        x, y = f"{a:.{digits}f}", f"{b:.{digits}f}"
        if x != y:
            return x, y
    return f"{a:.{most}f}", f"{b:.{most}f}"


def _refuse(answer: Answer, reason: str, message: str) -> Answer:
    answer.decision, answer.reason, answer.answer, answer.citations = "refused", reason, message, []
    return answer
