"""Global search with an LLM: a map-reduce over community summaries, as in GraphRAG's global
search, under a token budget and with citations back to passages.

Map: the summaries of the communities nearest the question (the community operator's picks,
best first) are packed into at most `retrieve.global_map_calls` prompts of at most
`retrieve.global_map_tokens` tokens each (prompts/global_map); the LLM lists key points, each
naming the summaries it comes from and an importance score 0–100. Reduce: the points are
pooled, those scored 0 dropped, the rest ordered by score and kept up to
`retrieve.global_points_tokens`; the final answer is the answerer's, which reads them as graph
context beside the cited excerpts. A point is never cited itself: it carries the passages of the
communities it names (Hint.passage_ids), and the answer can cite it only through those.

Only summaries visible to the question are mapped (the community operator already removed
what hidden passages say), so a masked example never sees its evidence this way.
"""
from __future__ import annotations

from ..errors import BackendError
from ..offline import count_tokens
from ..records import Hint, StageCost

MAX_POINT_CHARS = 300


def map_batches(hints: list[Hint], limit_tokens: int, max_calls: int, encoding: str) -> list[list[int]]:
    """Indices of the community hints per map call: best first, each batch within the token
    limit (a summary longer than the limit goes alone, cut by the LLM layer's own context)."""
    batches: list[list[int]] = []
    used = 0
    for i, hint in enumerate(hints):
        cost = count_tokens(hint.text, encoding) + 8
        if not batches or (used + cost > limit_tokens and batches[-1]):
            if len(batches) >= max_calls:
                break
            batches.append([])
            used = 0
        batches[-1].append(i)
        used += cost
    return [b for b in batches if b]


def map_points(question: str, hints: list[Hint], batch: list[int], llm, cost: StageCost) -> list[Hint]:
    """One map call: the key points of the batch's summaries, as hints citing their passages."""
    from ..llm import charged, complete_json, render_prompt

    shown = "\n\n".join(f"[{n}] {' '.join(hints[i].text.split())}" for n, i in enumerate(batch, start=1))
    messages = render_prompt("global_map", summaries=shown.replace("<<<", "< < <").replace(">>>", "> > >"),
                             question=question)
    reply, _ = charged(llm, cost, lambda: complete_json(llm, messages, max_tokens=300, required=("points",)))
    points = []
    for item in reply.get("points") or []:
        if not isinstance(item, dict):
            continue
        text = " ".join(str(item.get("point") or "").split())[:MAX_POINT_CHARS]
        try:
            score = max(0.0, min(100.0, float(item.get("score", 0))))
        except (TypeError, ValueError):
            score = 0.0
        cited = [batch[n - 1] for n in _numbers(item.get("summaries")) if 1 <= n <= len(batch)]
        if not text or score <= 0 or not cited:
            continue  # an uncited point cannot be traced back to passages
        passage_ids = list(dict.fromkeys(p for i in cited for p in hints[i].passage_ids))
        points.append(Hint(kind="point", text=text, score=round(score / 100.0, 4), passage_ids=passage_ids))
    return points


def reduce_points(points: list[Hint], limit_tokens: int, encoding: str) -> list[Hint]:
    """The best points (by importance) within the token limit, duplicates dropped."""
    kept, seen, used = [], set(), 0
    for point in sorted(points, key=lambda h: -h.score):
        key = point.text.lower()
        cost = count_tokens(point.text, encoding)
        if key in seen or used + cost > limit_tokens:
            continue
        seen.add(key)
        kept.append(point)
        used += cost
    return kept


def global_search(question: str, community_hints: list[Hint], llm, cost: StageCost, *, map_tokens: int,
                  map_calls: int, points_tokens: int, encoding: str = "cl100k_base") -> tuple[list[Hint], list[str]]:
    """(key points as hints, notes). A map call that fails is noted and skipped."""
    points: list[Hint] = []
    notes: list[str] = []
    for batch in map_batches(community_hints, map_tokens, map_calls, encoding):
        try:
            points += map_points(question, community_hints, batch, llm, cost)
        except BackendError as exc:
            notes.append(f"global map call failed ({exc}); its summaries were skipped")
    return reduce_points(points, points_tokens, encoding), notes


def _numbers(value) -> list[int]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        try:
            out.append(int(item))
        except (TypeError, ValueError):
            continue
    return out
