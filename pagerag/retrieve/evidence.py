"""Evidence E: cut the ranked pool to the budget B and turn it into spans of source text.

The pool arrives in ranker order (ranker.py); passages are taken in that order while they fit.
No operator has a reserved share: a graph candidate gets in only by outranking the text floor's
marginal passage. The one exception is the floor's own top passage, which is always kept (the
always-on textual floor of the paper). A passage that does not fit may still give its best sentence window (from the
rerank operator) when that fits: the span shrinks, the quote stays exact. Every span's text is
sliced from the source it names, so it is exact by construction.
"""
from __future__ import annotations

from ..offline import count_tokens, get_encoding
from ..records import Evidence, Plan, set_place
from .pool import PoolItem
from .state import RepoState

MIN_TRIM_TOKENS = 24  # below this a trimmed window is not worth a citation


def select(items: list[PoolItem], plan: Plan, state: RepoState, encoding: str = "cl100k_base") -> list[Evidence]:
    """The evidence within the budget, in pool order, ranked 1..n.

    The text floor's top passage is always kept (whole, else its best window, else a prefix):
    its tokens are set aside from the start, so nothing ranked anywhere can crowd it out."""
    budget = plan.budget_tokens
    chosen: dict[int, tuple[PoolItem, Evidence]] = {}
    keep = floor_top(items)
    kept = None
    if keep is not None:
        kept = _fit(keep, plan, state, budget, encoding, allow_trim=True) or _prefix(keep, plan, state, budget, encoding)
    reserved = kept.n_tokens if kept is not None else 0
    used = 0
    for it in items:
        if it is keep and kept is not None:
            chosen[it.row] = (it, kept)
            used, reserved = used + reserved, 0
            continue
        room = budget - used - reserved
        if room < MIN_TRIM_TOKENS and (chosen or reserved):
            if not reserved:
                break
            continue  # the floor's top is still to come
        ev = _fit(it, plan, state, room, encoding, allow_trim=True)
        if ev is not None and not _mostly_repeats(ev, chosen.values()) and not (kept and _overlaps(ev, kept)):
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


def floor_top(items: list[PoolItem]) -> PoolItem | None:
    """The text floor's best passage in the pool (None without a text floor)."""
    return next((it for it in items if it.operators.get("text", {}).get("rank") == 1), None)


def _overlaps(ev: Evidence, kept: Evidence) -> bool:
    return _mostly_repeats(ev, [(None, kept)])


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
    return set_place(Evidence(
        p.passage_id, p.doc_id, p.file, start, end, text,
        n_tokens=tokens, operators=ops, scores=scores,
        paths=list(it.paths) if plan.structural_guidance else [],
        communities=list(it.communities) if plan.structural_guidance else [],
        trimmed=trimmed, entities=list(it.entities),
    ), state.place(p.doc_id, start))
