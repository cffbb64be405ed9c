"""plan(analysis, settings) -> Plan: which operators run, under what budget.

Every operator the preset allows runs when the graph gives it something to read — neighbour
needs a linked entity, path two, community a summarised graph, PPR only the graph (the dense
top passages seed it even when nothing is linked) — and proposes candidates with its own
scores; one ranker orders their union under the budget (ranker.py, evidence.py). There are no
budget shares: the question's need (its class probabilities) enters the ranker as features
instead, so a global question trusts community passages more and a complex one paths. The
preset removes what it forbids (retrieve.floor, retrieve.graph = none, retrieve.operators,
structural_guidance). Every decision is written into `Plan.reasons`.
"""
from __future__ import annotations

from ..errors import InputError
from ..settings import Settings
from .linking import MIN_LINK_SCORE
from ..records import GRAPH_OPERATORS, Analysis, Plan

ORDER = ("text", "ppr", "neighbour", "path", "community")


def strong_links(analysis: Analysis) -> list:
    return [l for l in analysis.links if l.score >= MIN_LINK_SCORE]


def plan(analysis: Analysis, settings: Settings, budget_tokens: int | None = None) -> Plan:
    cfg = settings.retrieve
    budget = cfg.budget_tokens if budget_tokens is None else budget_tokens
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        raise InputError(f"the evidence budget must be a positive number of tokens, got {budget}")
    reasons: list[str] = [f"need {analysis.need} ({analysis.decided_by}: {analysis.reason})"]
    chosen = _operators(analysis, settings, reasons)
    operators = list(chosen)
    if "rerank" in cfg.operators:
        operators.append("rerank")
    else:
        reasons.append("rerank off: the pipeline does not list it")
    ranked_by = "operator scores" if cfg.ranker == "operator" else "the fitted ranker"
    reasons.append(f"one pool ordered by {ranked_by} under {budget} tokens")
    return Plan(
        need=analysis.need, operators=operators, budget_tokens=budget, graph=cfg.graph,
        floor=cfg.floor, structural_guidance=cfg.structural_guidance, max_paths=cfg.max_paths,
        max_hops=cfg.max_hops, max_communities=cfg.max_communities, top_k=cfg.top_k, reasons=reasons,
    )


def _operators(analysis: Analysis, settings: Settings, reasons: list[str]) -> list[str]:
    cfg = settings.retrieve
    allowed = set(cfg.operators)
    n_links = len(strong_links(analysis))
    chosen: list[str] = []
    if not cfg.floor:
        reasons.append("no text floor: the pipeline turns it off (graph evidence only)")
    elif "text" not in allowed:
        reasons.append("text floor off: the pipeline does not list it")
    else:
        chosen.append("text")
    if cfg.graph == "none":
        reasons.append("graph operators off: no graph in this pipeline")
    for op in ORDER[1:] if cfg.graph != "none" else ():
        if op not in allowed:
            continue  # the preset does not list it
        why = _graph_operator_blocked(op, cfg, n_links)
        if why:
            reasons.append(f"{op} off: {why}")
        else:
            chosen.append(op)
    if not chosen and cfg.graph != "none" and "community" in allowed and cfg.max_communities > 0:
        chosen.append("community")  # without the floor and without a linked entity the graph can still be read top-down
        reasons.append("community on as the fallback: nothing else can run")
    if not chosen:
        reasons.append("no operator can run: the evidence will be empty")
    return chosen


def _graph_operator_blocked(op: str, cfg, n_links: int) -> str:
    if op == "path" and not cfg.structural_guidance:
        return "structural guidance off"
    if op == "path" and (cfg.max_paths == 0 or n_links < 2):
        return f"needs two linked entities, found {n_links}" if n_links < 2 else "max_paths = 0"
    if op == "neighbour" and n_links < 1:
        return "no linked entity"
    if op == "community" and cfg.max_communities == 0:
        return "max_communities = 0"
    return ""


def widen(plan_: Plan, settings: Settings, analysis: Analysis, factor: float = 1.5) -> Plan:
    """The escalation route (tried once when the RCS gate is unsure): a larger budget; every
    allowed operator already runs."""
    reasons = [*plan_.reasons, f"widened: budget x{factor}"]
    return Plan(**{**plan_.__dict__, "budget_tokens": int(plan_.budget_tokens * factor), "reasons": reasons})


__all__ = ["plan", "widen", "strong_links", "GRAPH_OPERATORS"]
