"""The sufficiency judge s(q, E) in {0, 1}: does the evidence state the answer?

Three judges, chosen by `generate.judge`:
- logprob (preferred with an LLM): prompts/judge_sufficiency_yesno asks a yes/no question and
  the backend's next-token log-probabilities give P(yes); sufficient when P(yes) >=
  `generate.judge_threshold`. A weak local model that rarely *writes* a refusal still ranks
  "yes" above "no" far more reliably (measured on a 1.5B model: P(yes) 0.87 on an obvious yes,
  0.23 on an obvious no), and the threshold is then a dial, not a hope.
- json: prompts/judge_sufficiency returns {"sufficient": bool, "missing": str}; used when the
  backend gives no log-probabilities (auto falls back to it).
- heuristic (no LLM): the rule in support.py — the question's named things, its asked-for
  attribute words and a candidate of the expected answer type in one place of the evidence.
With an LLM the no-LLM rule still counts twice: `generate.judge_type_check` refuses a question
asking for a sum, a year or a name when no evidence sentence holds one, whatever the model
says; and the P(yes) threshold is `judge_threshold` when the rule finds the evidence sufficient
but `judge_threshold_overrule` when it does not, so a weak model's "yes" must be surer to
overrule the rule than to agree with it. The judge reads the best excerpts up to
`generate.judge_context_tokens` (a small model judges a short context better).
"""
from __future__ import annotations

from ..errors import BackendError
from ..settings import GenerateSettings
from ..llm import LLM, charged, parse_json_object, render_prompt
from ..records import Excerpt, StageCost, Verdict
from .answer import render_excerpts
from .context import graph_context
from .support import TYPE_WORDS, Support

MISSING_LIMIT = 200


def heuristic_verdict(support: Support) -> Verdict:
    best = support.best
    detail = ""
    if best is not None:
        where = f"{best.window.passage_id} [{best.start}:{best.end}]"
        found = f"; answer-type candidates {best.candidates[:3]}" if best.candidates else ""
        detail = (f"best sentence {where}: names {best.names_found}, attribute coverage "
                  f"{best.attribute_coverage:.2f}{found}")
    return Verdict(support.sufficient, "heuristic", support.missing, round(support.score, 4), detail)


def type_check_verdict(support: Support) -> Verdict | None:
    """A refusal when the question asks for a checkable answer type and no evidence sentence
    holds one near the question's words (None when the check does not apply or passes)."""
    if support.type_found is not False:
        return None
    kind = TYPE_WORDS.get(support.answer_type, support.answer_type)
    return Verdict(False, "type-check", f"the evidence never states the {kind} asked for", 0.0,
                   f"no evidence sentence holds a {kind} near the question's words")


def logprob_verdict(llm: LLM, question: str, excerpts: list[Excerpt], threshold: float,
                    cost: StageCost, graph_context: str = "") -> Verdict | None:
    """P(yes) judge; None when the backend cannot give log-probabilities."""
    messages = render_prompt("judge_sufficiency_yesno", excerpts=render_excerpts(excerpts), question=question,
                             graph_context=graph_context)
    p_yes = charged(llm, cost, lambda: llm.yes_no_logprob(messages))
    if p_yes is None:
        return None
    sufficient = p_yes >= threshold
    missing = "" if sufficient else f"the judge found no statement of the answer in the evidence (P(yes) = {p_yes:.2f})"
    return Verdict(sufficient, "logprob", missing, round(float(p_yes), 4), f"threshold {threshold}")


def json_verdict(llm: LLM, question: str, excerpts: list[Excerpt], cost: StageCost, graph_context: str = "") -> Verdict:
    """The JSON judge. A reply that cannot be read as a verdict is an insufficient verdict (the
    judge did not say the evidence suffices); a transport failure still raises BackendError."""
    messages = render_prompt("judge_sufficiency", excerpts=render_excerpts(excerpts), question=question,
                             graph_context=graph_context)
    completion = charged(llm, cost, lambda: llm.complete(messages, max_tokens=80, temperature=0.0, json_mode=True))
    try:
        reply = parse_json_object(completion.text, ("sufficient",), source="the sufficiency judge")
    except BackendError as exc:
        return Verdict(False, "json", "the judge's reply could not be read as a verdict", None, str(exc))
    value = reply.get("sufficient")
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no"):
        value = value.strip().lower() in ("true", "yes")
    if not isinstance(value, bool):
        return Verdict(False, "json", "the judge's reply could not be read as a verdict", None,
                       f"the sufficiency judge answered sufficient={value!r}, not true or false")
    missing = " ".join(str(reply.get("missing") or "").split())[:MISSING_LIMIT]
    if not value and not missing:
        missing = "the judge found no statement of the answer in the evidence"
    return Verdict(value, "json", "" if value else missing, None, "")


def judge_sufficiency(question: str, excerpts: list[Excerpt], support: Support, llm: LLM | None,
                      cfg: GenerateSettings, cost: StageCost, hints=()) -> Verdict:
    """s(q, E) by the configured judge (see the module docstring); `hints`: the retrieval's graph
    context, shown beside the excerpts it was drawn from (generate.graph_context)."""
    shown = judge_excerpts(excerpts, cfg.judge_context_tokens)
    context = graph_context(hints, shown, cfg.graph_context_tokens) if cfg.graph_context else ""
    verdict = _judge(question, shown, support, llm, cfg, cost, context)
    verdict.rule = support.sufficient
    return verdict


def judge_excerpts(excerpts: list[Excerpt], max_tokens: int) -> list[Excerpt]:
    """The best excerpts up to `max_tokens` (at least one): a prefix of the answerer's list, so
    the judge prompt and the answer prompt share their beginning."""
    out: list[Excerpt] = []
    used = 0
    for e in excerpts:
        if out and used + e.n_tokens > max_tokens:
            break
        out.append(e)
        used += e.n_tokens
    return out


def _judge(question: str, excerpts: list[Excerpt], support: Support, llm: LLM | None, cfg: GenerateSettings,
           cost: StageCost, context: str = "") -> Verdict:
    method = cfg.judge
    if llm is None or method == "heuristic":
        return heuristic_verdict(support)
    if cfg.judge_type_check:
        refused = type_check_verdict(support)
        if refused is not None:
            return refused
    if not excerpts:
        return Verdict(False, method, "no evidence was retrieved")
    if method in ("auto", "logprob"):
        # the model needs more confidence to overrule the no-LLM rule than to agree with it
        threshold = cfg.judge_threshold if support.sufficient else cfg.judge_threshold_overrule
        verdict = logprob_verdict(llm, question, excerpts, threshold, cost, context)
        if verdict is not None:
            return verdict
        if method == "logprob":
            raise BackendError(f"generate.judge = logprob, but the {llm.name} backend gives no log-probabilities; "
                               "use judge = auto or json")
    return json_verdict(llm, question, excerpts, cost, context)
