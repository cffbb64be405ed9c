"""The community operator O_c: representative passages of the communities nearest the question.

A global question (themes, how a character changes, what the book says about X) has its
evidence spread over the book, so no single passage is close to it. The operator ranks the
communities of the graph by how near they are to the question — half the cosine of the
community's vector (its central names and passages: views.composed_community_vectors), half the
mean cosine of its three nearest passages — and opens several of them (never a parent or child
of one already opened, never a community of one entity). From each it
returns its representative passages: the ones that mention the community's central members
(weighted degree inside the community) and are near the question. Each opened community's
summary becomes a hint; when passages are hidden (`retrieve(exclude=...)`), the summary loses
every sentence quoted from them and every member named only in them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..records import Community, Hint
from ..text.sentences import split_sentences
from .graph_operators import STRUCTURE_WEIGHT, view_for
from .operators import Candidate, OperatorResult, Query, hide
from .views import GraphView

PASSAGES_PER_COMMUNITY = 3
NEAREST_PASSAGES = 3  # a community's passage relevance: mean cosine of its best few passages
SUMMARY_SHARE = 0.5  # of a community's relevance that comes from its vector (what it is about)
MIN_ENTITIES = 2
QUOTE_PROBE = 60  # characters of a summary sentence looked up in the hidden passages


def nearest_communities(query: Query, view: GraphView, passage_sims: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The `limit` communities the operator opens (pick_communities over community_relevance)."""
    summary_sims = query.state.community_vectors(query.plan.graph) @ query.vector
    segments = query.state.memo(("community_segments", query.plan.graph),
                                lambda: CommunitySegments.of(view, query.state.community_rows(query.plan.graph)))
    return pick_nearest(view, segments, summary_sims, passage_sims, limit)


def community_relevance(segments: "CommunitySegments", summary_sims: np.ndarray, passage_sims: np.ndarray,
                        positions: np.ndarray | None = None) -> np.ndarray:
    """Per community of the view: SUMMARY_SHARE * cosine(question, community vector) + the rest *
    mean cosine of its NEAREST_PASSAGES best visible passages; -inf for a community it cannot
    open, or (with `positions`) outside those positions of `segments`."""
    relevance = np.full(summary_sims.shape[0], -np.inf)
    part = segments if positions is None else segments.subset(positions)
    if part.index.size:
        nearest = part.mean_of_best(passage_sims, NEAREST_PASSAGES)
        opened = np.isfinite(nearest)  # a community whose passages are all hidden cannot be opened
        index = part.index[opened]
        relevance[index] = SUMMARY_SHARE * summary_sims[index] + (1 - SUMMARY_SHARE) * nearest[opened]
    return relevance


def pick_nearest(view: GraphView, segments: "CommunitySegments", summary_sims: np.ndarray, passage_sims: np.ndarray,
                 limit: int, first: int = 32) -> list[tuple[int, float]]:
    """pick_communities(view, community_relevance(...), limit), without the relevance of every
    community: a community's best passage bounds the mean of its best few, so the exact relevance
    is needed only for those whose bound beats what is picked (a library holds thousands of
    communities and half a million community passages). Starts with the `first` highest bounds
    and widens until every pick is above the bound of all the rest, which makes it exact."""
    if segments.index.size == 0 or limit <= 0:
        return []
    bound = SUMMARY_SHARE * summary_sims[segments.index] + (1 - SUMMARY_SHARE) * segments.best(passage_sims)
    order = np.argsort(-bound, kind="stable")
    order = order[np.isfinite(bound[order])]
    size = first
    while True:
        positions = np.sort(order[:size])
        picked = pick_communities(view, community_relevance(segments, summary_sims, passage_sims, positions), limit)
        if size >= order.size:
            return picked
        rest = float(bound[order[size]])
        if len(picked) == limit and picked[-1][1] > rest + 1e-12:  # a mean may round one ulp above its max
            return picked
        size *= 4


@dataclass(frozen=True)
class CommunitySegments:
    """The passage rows of every community that can be opened (MIN_ENTITIES members, some
    passage), concatenated, so per-community top-k runs as a few whole-array operations."""

    index: np.ndarray  # the communities' indices in the view
    rows: np.ndarray  # their passage rows, one community after another
    starts: np.ndarray  # where each community's rows begin in `rows`
    owner: np.ndarray  # per entry of `rows`, its position in `index`

    @classmethod
    def of(cls, view: GraphView, rows_of: list[tuple[np.ndarray, np.ndarray]]) -> "CommunitySegments":
        index = [i for i, c in enumerate(view.graph.communities)
                 if len(c.entity_ids) >= MIN_ENTITIES and rows_of[i][0].size]
        return cls.joined(np.array(index, np.int64), [rows_of[i][0] for i in index])

    @classmethod
    def joined(cls, index: np.ndarray, parts: list[np.ndarray]) -> "CommunitySegments":
        """The segments of communities `index`, whose passage rows are `parts` (one array each)."""
        sizes = np.array([p.size for p in parts], np.int64)
        rows = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if parts else np.zeros(0, np.int64)
        return cls(index, rows, starts, np.repeat(np.arange(len(parts)), sizes))

    def best(self, passage_sims: np.ndarray) -> np.ndarray:
        """Per community, its largest passage similarity (-inf when all its passages are hidden)."""
        return np.maximum.reduceat(passage_sims[self.rows].astype(np.float64), self.starts)

    def subset(self, positions: np.ndarray) -> "CommunitySegments":
        """The segments at `positions` (sorted positions in `index`)."""
        ends = np.append(self.starts[1:], self.rows.size)
        return CommunitySegments.joined(self.index[positions],
                                        [self.rows[self.starts[p]:ends[p]] for p in positions.tolist()])

    def mean_of_best(self, passage_sims: np.ndarray, k: int) -> np.ndarray:
        """Per community, the mean of the finite values among its k largest passage similarities
        (-inf when none is finite)."""
        values = passage_sims[self.rows].astype(np.float64)
        position = np.arange(values.size)
        total, count = np.zeros(self.index.size), np.zeros(self.index.size)
        for _ in range(k):
            best = np.maximum.reduceat(values, self.starts)
            finite = np.isfinite(best)
            total[finite] += best[finite]
            count[finite] += 1
            # take one occurrence of each community's best out of the running
            first = np.minimum.reduceat(np.where(values == best[self.owner], position, values.size), self.starts)
            values[first[first < values.size]] = -np.inf
        out = np.full(self.index.size, -np.inf)
        out[count > 0] = total[count > 0] / count[count > 0]
        return out


def pick_communities(view: GraphView, relevance: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The `limit` most relevant openable communities, skipping the parent or child of one already
    picked (it would repeat it): [(index, relevance)]."""
    picked: list[tuple[int, float]] = []
    communities = view.graph.communities
    for i in np.argsort(-relevance, kind="stable").tolist():
        if not np.isfinite(relevance[i]) or len(picked) >= limit:
            break
        c = communities[i]
        if any(c.parent == communities[j].community_id or communities[j].parent == c.community_id for j, _ in picked):
            continue
        picked.append((i, float(relevance[i])))
    return picked


def community(query: Query) -> OperatorResult:
    """O_c: representative passages of the nearest communities, with their summaries as hints."""
    view = view_for(query)
    if not view.graph.communities or query.plan.max_communities == 0:
        return OperatorResult("community", [])
    passage_sims = hide(query.state.vectors @ query.vector, query.exclude).astype(np.float64)
    picked = nearest_communities(query, view, passage_sims, query.plan.max_communities)
    rows_of = query.state.community_rows(query.plan.graph)
    hidden = HiddenText(query)
    member = np.zeros(len(query.state.passages))  # per passage: relevance of the best opened community holding it
    candidates: dict[int, Candidate] = {}
    hints = []
    for rank, (i, relevance) in enumerate(picked, start=1):
        c = view.graph.communities[i]
        rows, centrality = rows_of[i]
        scores = passage_sims[rows] + STRUCTURE_WEIGHT * centrality
        chosen = [j for j in np.argsort(-scores, kind="stable")[:PASSAGES_PER_COMMUNITY].tolist()
                  if np.isfinite(scores[j])]
        for j in chosen:
            row, score = int(rows[j]), float(scores[j]) + STRUCTURE_WEIGHT * relevance
            cand = candidates.get(row)
            if cand is None or score > cand.score:
                candidates[row] = cand = Candidate(
                    row=row, score=score, communities=cand.communities if cand else [],
                    components={"similarity": round(float(passage_sims[row]), 4), "community": round(relevance, 4),
                                "centrality": round(float(centrality[j]), 4), "community_rank": rank})
            cand.communities.append(c.community_id)
        text = hidden.visible_summary(view, c, rows)
        hints.append(Hint(kind="community", text=text, score=round(relevance, 4),
                          passage_ids=[query.state.passages[int(rows[j])].passage_id for j in chosen]))
        member[rows] = np.maximum(member[rows], relevance)
    return OperatorResult("community", sorted(candidates.values(), key=lambda c: -c.score), hints,
                          vectors={"community_member": member})


WIDE_HIDING = 2000  # hidden passages past which a summary is checked against its own community's only


class HiddenText:
    """The text of the passages hidden from this question, to keep it out of graph context."""

    def __init__(self, query: Query):
        self.state = query.state
        self.exclude = query.exclude
        self.hidden_ids = {query.state.passages[r].passage_id for r in query.exclude}
        self._cache: dict[int, str] = {}

    def quotes(self, sentence: str, rows: np.ndarray | None = None) -> bool:
        """Whether a hidden passage holds `sentence`. A summary's sentences are quotations of its
        community's passages, so with many passages hidden (a question limited to some documents
        of a library) only the community's hidden passages (`rows`) are searched."""
        probe = _fold(sentence)[:QUOTE_PROBE]
        if not probe:
            return False
        if rows is not None and len(self.exclude) > WIDE_HIDING:
            candidates = [int(r) for r in rows.tolist() if int(r) in self.exclude]
        else:
            candidates = sorted(self.exclude)
        return any(probe in self._folded_passage(r) for r in candidates)

    def visible_summary(self, view: GraphView, c: Community, rows: np.ndarray) -> str:
        """"title: summary", less what only hidden passages say (see the module docstring)."""
        label = c.title or c.community_id
        if not self.hidden_ids:
            return f"{label}: {c.summary}".strip()
        members = [view.entity(m) for m in c.entity_ids if m in view.entity_row]
        shown = [e.name for e in members if any(p not in self.hidden_ids for p in e.passage_ids)]
        member_text = [self._folded_passage(int(r)) for r in rows.tolist()]
        sentences = [c.summary[s:e] for s, e in split_sentences(c.summary)]
        # the summary's own sentences are quotations of member passages; the rest is the entity list
        body = [s for s in sentences if any(_fold(s)[:QUOTE_PROBE] in text for text in member_text)]
        kept = [s for s in body if not self.quotes(s, rows)]
        names = sorted(shown, key=lambda n: (c.summary.find(n) < 0, c.summary.find(n)))[:8]
        title = ", ".join(names[:3]) or c.community_id
        head = f"Entities: {', '.join(names)}." if names else ""
        return f"{title}: {' '.join([head, *kept]).strip()}".strip()

    def _folded_passage(self, row: int) -> str:
        if row not in self._cache:
            self._cache[row] = _fold(self.state.passages[row].text)
        return self._cache[row]


def _fold(text: str) -> str:
    return " ".join(text.split())
