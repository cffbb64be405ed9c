"""plan(analysis, settings) -> Plan: which operators run, in what order, with what budget share.

The route per need (before the preset's limits):
  local       text 0.85, neighbour 0.15                      (+ rerank)
  relational  text 0.45, neighbour 0.30, path 0.25           (+ rerank)
  multi-hop   text 0.45, path 0.30, neighbour 0.25           (+ rerank)
  global      text 0.55, community 0.30, neighbour 0.15      (+ rerank)
The multi-hop route also searches each sentence of the question with the text floor.
Graph operators need what they read: neighbour a linked entity, path two, community a global
need. The preset then removes what it forbids (retrieve.floor, retrieve.graph = none,
retrieve.operators, structural_guidance) and the shares of removed operators are given to the
ones left, in proportion. Every decision is written into `Plan.reasons`.
"""
from __future__ import annotations

from ..errors import InputError
from ..settings import Settings
from .linking import MIN_LINK_SCORE
from ..records import Analysis, Plan

ROUTES: dict[str, list[tuple[str, float]]] = {
    "local": [("text", 0.85), ("neighbour", 0.15)],
    "relational": [("text", 0.45), ("neighbour", 0.30), ("path", 0.25)],
    "multi-hop": [("text", 0.45), ("path", 0.30), ("neighbour", 0.25)],
    "global": [("text", 0.55), ("community", 0.30), ("neighbour", 0.15)],
}


def strong_links(analysis: Analysis) -> list:
    return [l for l in analysis.links if l.score >= MIN_LINK_SCORE]


def plan(analysis: Analysis, settings: Settings, budget_tokens: int | None = None) -> Plan:
    cfg = settings.retrieve
    budget = cfg.budget_tokens if budget_tokens is None else budget_tokens
    if not isinstance(budget, int) or budget <= 0:
        raise InputError(f"the evidence budget must be a positive number of tokens, got {budget}")
    reasons: list[str] = [f"need {analysis.need} ({analysis.decided_by}: {analysis.reason})"]
    n_links = len(strong_links(analysis))
    route = dict(ROUTES[analysis.need])
    route = _apply_preset(route, analysis, settings, n_links, reasons)
    total = sum(route.values())
    shares = {op: round(share / total, 4) for op, share in route.items()} if total else {}
    operators = list(shares)
    if "rerank" in cfg.operators:
        operators.append("rerank")
    else:
        reasons.append("rerank off: the pipeline does not list it")
    return Plan(
        need=analysis.need, operators=operators, shares=shares, budget_tokens=budget, graph=cfg.graph,
        floor=cfg.floor, structural_guidance=cfg.structural_guidance, max_paths=cfg.max_paths,
        max_hops=cfg.max_hops, max_communities=cfg.max_communities, top_k=cfg.top_k, reasons=reasons,
    )


def _apply_preset(route: dict[str, float], analysis: Analysis, settings: Settings, n_links: int,
                  reasons: list[str]) -> dict[str, float]:
    cfg = settings.retrieve
    allowed = set(cfg.operators)
    if not cfg.floor:
        route.pop("text", None)
        reasons.append("no text floor: the pipeline turns it off (graph evidence only)")
    elif "text" not in allowed:
        route.pop("text", None)
        reasons.append("text floor off: the pipeline does not list it")
    for op in [op for op in route if op != "text"]:
        why = _graph_operator_blocked(op, cfg, allowed, n_links)
        if why:
            route.pop(op)
            reasons.append(f"{op} off: {why}")
    if not route and cfg.graph != "none" and "community" in allowed and cfg.max_communities > 0:
        # Without the floor and without a linked entity the graph can still be read top-down.
        route["community"] = 1.0
        reasons.append("community on as the fallback: nothing else can run")
    if not route:
        reasons.append("no operator can run: the evidence will be empty")
    return route


def _graph_operator_blocked(op: str, cfg, allowed: set[str], n_links: int) -> str:
    if cfg.graph == "none":
        return "no graph in this pipeline"
    if op not in allowed:
        return "the pipeline does not list it"
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
    """The escalation route: every operator the pipeline allows and a larger budget (used once
    when the RCS gate is unsure)."""
    cfg = settings.retrieve
    route = {"text": 0.4, "neighbour": 0.2, "path": 0.2, "community": 0.2}
    reasons = [*plan_.reasons, f"widened: all allowed operators, budget x{factor}"]
    route = _apply_preset(route, analysis, settings, len(strong_links(analysis)), reasons)
    total = sum(route.values()) or 1.0
    shares = {op: round(s / total, 4) for op, s in route.items()}
    operators = [*shares, *(["rerank"] if "rerank" in cfg.operators else [])]
    return Plan(**{**plan_.__dict__, "operators": operators, "shares": shares,
                   "budget_tokens": int(plan_.budget_tokens * factor), "reasons": reasons})
