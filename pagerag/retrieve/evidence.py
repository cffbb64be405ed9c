"""Evidence E: cut the ordered pool to the budget B and turn it into spans of source text.

Two passes. First each operator's share of B (in plan order) is filled with its own best
passages — what is already chosen and was found by it counts — so a structural operator is not
crowded out by the text floor; then what is left of B goes to the best remaining passages. A
passage that does not fit may still give its best sentence window (from the rerank operator)
when that fits: the span shrinks, the quote stays exact. Every span's text is sliced from the
source it names, so it is exact by construction.
"""
from __future__ import annotations

from ..offline import count_tokens, get_encoding
from ..records import Evidence, Plan
from .fusion import PoolItem
from .state import RepoState

MIN_TRIM_TOKENS = 24  # below this a trimmed window is not worth a citation


def select(items: list[PoolItem], plan: Plan, state: RepoState, encoding: str = "cl100k_base") -> list[Evidence]:
    """The evidence within the budget, in pool order, ranked 1..n."""
    budget = plan.budget_tokens
    chosen: dict[int, tuple[PoolItem, Evidence]] = {}
    used = 0
    for op, share in plan.shares.items():
        quota = int(share * budget)
        # What is already chosen and was found by this operator counts toward its share too.
        spent = sum(ev.n_tokens for it, ev in chosen.values() if op in it.operators)
        for it in items:
            if spent >= quota:
                break
            if op not in it.operators or it.row in chosen:
                continue
            ev = _fit(it, plan, state, min(quota - spent, budget - used), encoding, allow_trim=False)
            if ev is None or _mostly_repeats(ev, chosen.values()):
                continue
            chosen[it.row] = (it, ev)
            spent += ev.n_tokens
            used += ev.n_tokens
    for it in items:
        if it.row in chosen:
            continue
        room = budget - used
        if room < MIN_TRIM_TOKENS and chosen:
            break
        ev = _fit(it, plan, state, room, encoding, allow_trim=True)
        if ev is not None and not _mostly_repeats(ev, chosen.values()):
            chosen[it.row] = (it, ev)
            used += ev.n_tokens
    if not chosen and items:
        ev = _prefix(items[0], plan, state, budget, encoding)  # budget smaller than any window
        if ev is not None:
            chosen[items[0].row] = (items[0], ev)
    order = {it.row: i for i, it in enumerate(items)}
    evidence = [ev for _, ev in sorted(chosen.values(), key=lambda pair: order[pair[0].row])]
    for rank, ev in enumerate(evidence, start=1):
        ev.rank = rank
    return evidence


def _mostly_repeats(ev: Evidence, chosen) -> bool:
    """True when over half of `ev` is already quoted (neighbouring passages overlap)."""
    length = max(ev.end - ev.start, 1)
    for _, other in chosen:
        if other.doc_id != ev.doc_id:
            continue
        overlap = min(ev.end, other.end) - max(ev.start, other.start)
        if overlap > length / 2:
            return True
    return False


def _fit(it: PoolItem, plan: Plan, state: RepoState, room: int, encoding: str, allow_trim: bool) -> Evidence | None:
    p = state.passages[it.row]
    if p.n_tokens <= room:
        return _evidence(it, plan, state, p.start, p.end, int(p.n_tokens), False)
    if not allow_trim or room < MIN_TRIM_TOKENS:
        return None
    window = it.window
    if window is None:  # not reranked: no best window to fall back on
        return None
    tokens = count_tokens(window.text, encoding)
    if tokens <= room:
        return _evidence(it, plan, state, window.start, window.end, tokens, True)
    return None


def _prefix(it: PoolItem, plan: Plan, state: RepoState, budget: int, encoding: str) -> Evidence | None:
    """The longest whole-token prefix of the best window (or passage) within `budget` tokens."""
    p = state.passages[it.row]
    start, end = (it.window.start, it.window.end) if it.window else (p.start, p.end)
    source = state.source_text(p.doc_id)
    enc = get_encoding(encoding)
    ids = enc.encode(source[start:end], disallowed_special=())[:budget]
    if not ids:
        return None
    prefix = enc.decode(ids)
    if not source.startswith(prefix, start):  # a multi-byte character cut in two: drop it
        prefix = prefix.rstrip("\ufffd")
        if not source.startswith(prefix, start) or not prefix:
            return None
    end = start + len(prefix.rstrip())
    if end <= start:
        return None
    return _evidence(it, plan, state, start, end, count_tokens(source[start:end], encoding), True)


def _evidence(it: PoolItem, plan: Plan, state: RepoState, start: int, end: int, tokens: int, trimmed: bool) -> Evidence:
    """The Evidence record of pool item `it` for source span [start, end)."""
    order = list(plan.operators)
    p = state.passages[it.row]
    scores = {"final": round(it.final, 6)}
    for op, comps in it.operators.items():
        scores[op] = comps["score"]
        for key in ("dense", "bm25"):
            if key in comps:
                scores[key] = comps[key]
    if it.window is not None:
        scores["rerank"] = round(it.window.score, 4)
    ops = sorted(it.operators, key=lambda o: order.index(o) if o in order else len(order))
    if it.window is not None and "rerank" in order:
        ops.append("rerank")
    text = p.text if not trimmed and (start, end) == (p.start, p.end) else state.source_text(p.doc_id)[start:end]
    return Evidence(
        p.passage_id, p.doc_id, p.file, start, end, text,
        n_tokens=tokens, operators=ops, scores=scores,
        paths=list(it.paths) if plan.structural_guidance else [],
        communities=list(it.communities) if plan.structural_guidance else [],
        trimmed=trimmed,
    )
