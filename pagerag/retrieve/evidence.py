"""Evidence E: cut the ordered pool to the budget B and turn it into cited spans.

Two passes. First each operator's share of B (in plan order) is filled with its own best
passages — what is already chosen and was found by it counts — so a structural operator is not
crowded out by the text floor; then what is left of B goes to the best remaining passages. A passage that does not fit may still give its best
sentence window (from the rerank operator) when that fits: the span shrinks, the quote stays
exact. Every quote is checked against the source text before it is returned.
"""
from __future__ import annotations

from ..errors import RepositoryError
from ..offline import count_tokens, get_encoding
from .fusion import PoolItem
from .records import Evidence, Plan
from .state import RepoState

MIN_TRIM_TOKENS = 24  # below this a trimmed window is not worth a citation


class _Span:
    __slots__ = ("item", "start", "end", "tokens", "trimmed")

    def __init__(self, item: PoolItem, start: int, end: int, tokens: int, trimmed: bool):
        self.item, self.start, self.end, self.tokens, self.trimmed = item, start, end, tokens, trimmed


def select(items: list[PoolItem], plan: Plan, state: RepoState, encoding: str = "cl100k_base") -> list[_Span]:
    budget = plan.budget_tokens
    chosen: dict[int, _Span] = {}
    used = 0
    for op, share in plan.shares.items():
        quota = int(share * budget)
        # What is already chosen and was found by this operator counts toward its share too.
        spent = sum(s.tokens for s in chosen.values() if op in s.item.operators)
        for it in items:
            if spent >= quota:
                break
            if op not in it.operators or it.row in chosen:
                continue
            span = _fit(it, state, min(quota - spent, budget - used), encoding, allow_trim=False)
            if span is None or _mostly_repeats(span, chosen.values(), state):
                continue
            chosen[it.row] = span
            spent += span.tokens
            used += span.tokens
    for it in items:
        if it.row in chosen:
            continue
        room = budget - used
        if room < MIN_TRIM_TOKENS and chosen:
            break
        span = _fit(it, state, room, encoding, allow_trim=True)
        if span is not None and not _mostly_repeats(span, chosen.values(), state):
            chosen[it.row] = span
            used += span.tokens
    if not chosen and items:
        span = _prefix(items[0], state, budget, encoding)  # budget smaller than any window
        if span is not None:
            chosen[items[0].row] = span
    order = {it.row: i for i, it in enumerate(items)}
    return sorted(chosen.values(), key=lambda s: order[s.item.row])


def _mostly_repeats(span: _Span, chosen, state: RepoState) -> bool:
    """True when over half of `span` is already quoted (neighbouring passages overlap)."""
    doc = state.passages[span.item.row].doc_id
    length = max(span.end - span.start, 1)
    for other in chosen:
        if state.passages[other.item.row].doc_id != doc:
            continue
        overlap = min(span.end, other.end) - max(span.start, other.start)
        if overlap > length / 2:
            return True
    return False


def _fit(it: PoolItem, state: RepoState, room: int, encoding: str, allow_trim: bool) -> _Span | None:
    p = state.passages[it.row]
    if p.n_tokens <= room:
        return _Span(it, p.start, p.end, int(p.n_tokens), False)
    if not allow_trim or room < MIN_TRIM_TOKENS:
        return None
    window = it.window
    if window is None:  # not reranked: no best window to fall back on
        return None
    text = state.source_text(p.doc_id)[window.start : window.end]
    tokens = count_tokens(text, encoding)
    if tokens <= room:
        return _Span(it, window.start, window.end, tokens, True)
    return None


def _prefix(it: PoolItem, state: RepoState, budget: int, encoding: str) -> _Span | None:
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
    return _Span(it, start, end, count_tokens(source[start:end], encoding), True) if end > start else None


def to_evidence(spans: list[_Span], plan: Plan, state: RepoState, encoding: str = "cl100k_base") -> list[Evidence]:
    order = list(plan.operators)
    out = []
    for rank, span in enumerate(spans, start=1):
        it = span.item
        p = state.passages[it.row]
        text = state.source_text(p.doc_id)[span.start : span.end]
        if not span.trimmed and text != p.text:
            raise RepositoryError(f"{state.path}: passage {p.passage_id} no longer matches its source; rebuild")
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
        out.append(Evidence(
            passage_id=p.passage_id, doc_id=p.doc_id, file=p.file, start=span.start, end=span.end, text=text,
            n_tokens=span.tokens, operators=ops, scores=scores, rank=rank,
            paths=list(it.paths) if plan.structural_guidance else [],
            communities=list(it.communities) if plan.structural_guidance else [],
            trimmed=span.trimmed,
        ))
    return out


def verify_quotes(evidence: list[Evidence], state: RepoState) -> None:
    """Raise when a quote is not exactly the source text at its span (it never should be)."""
    for ev in evidence:
        if state.source_text(ev.doc_id)[ev.start : ev.end] != ev.text:
            raise RepositoryError(f"{state.path}: evidence {ev.passage_id}[{ev.start}:{ev.end}] does not match its source")
