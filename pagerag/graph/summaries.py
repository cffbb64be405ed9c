"""Stage 8: community titles and summaries.

Extractive by default (no LLM): the title names the community's most central entities (weighted
degree inside the community); the summary lists them and adds the `summary_sentences` sentences of
the community's passages that mention the most member entities (ties: more central members). When
`embed` is given and `settings.summary_embed` is on, the best-covering candidates are re-ranked by
closeness to their centroid (sentences about what the community is about rather than one-off lists
of names); it is off by default because embedding every candidate sentence costs more than the
rest of this stage together.
"""
from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from typing import Callable

import numpy as np

from ..records import Community, Entity, Graph, Passage
from ..settings import CommunitySettings
from ..text.sentences import split_sentences

TITLE_ENTITIES = 3
SUMMARY_ENTITIES = 8
CANDIDATE_PASSAGES = 12  # passages (richest in members first) searched for sentences
CANDIDATES_PER_SENTENCE = 4  # embedding re-ranks this many best-covering sentences per slot
MAX_SENTENCE_CHARS = 400

Embed = Callable[[list[str]], np.ndarray]


class _GraphIndex:
    """Entities by id and each entity's incident (neighbour, weight) pairs, built once per graph,
    so a community's centrality costs the degree of its members, not a scan of all relations."""

    def __init__(self, graph: Graph):
        self.entities = {e.entity_id: e for e in graph.entities}
        self.incident: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for r in graph.relations:
            if r.source != r.target:
                self.incident[r.source].append((r.target, r.weight))
                self.incident[r.target].append((r.source, r.weight))

    def centrality(self, entity_ids: list[str]) -> dict[str, float]:
        """Weighted degree of each member counting only relations inside the member set."""
        members = set(entity_ids)
        return {m: sum(w for other, w in self.incident.get(m, ()) if other in members) for m in entity_ids}

    def ranked(self, community: Community, degree: dict[str, float]) -> list[Entity]:
        """Members by centrality, then mentions, then id (deterministic)."""
        present = [self.entities[i] for i in community.entity_ids if i in self.entities]
        return sorted(present, key=lambda e: (-degree[e.entity_id], -e.mentions, e.entity_id))


def centrality(graph: Graph, entity_ids: list[str]) -> dict[str, float]:
    """Weighted degree of each member counting only relations inside the member set."""
    return _GraphIndex(graph).centrality(entity_ids)


def summary_sentences(text: str) -> list[str]:
    """The sentences of a passage that could go in a summary (line wraps collapsed)."""
    out = []
    for start, end in split_sentences(text):
        sentence = " ".join(text[start:end].split())
        if len(sentence) > 20 and any(c.isalpha() for c in sentence):
            out.append(sentence[:MAX_SENTENCE_CHARS])
    return out


def _alias_pattern(members: list[Entity]) -> tuple[re.Pattern, dict[str, str]]:
    """One case-insensitive regex over every member's name and aliases (longest first)."""
    owner: dict[str, str] = {}
    for e in members:
        for form in [e.name, *e.aliases]:
            form = " ".join(form.split()).lower()
            if len(form) > 1:
                owner.setdefault(form, e.entity_id)
    alternatives = sorted(owner, key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(map(re.escape, alternatives)) + r")\b", re.IGNORECASE), owner


def candidate_sentences(members: list[Entity], weights: dict[str, float], passages: dict[str, Passage],
                        community: Community, sentences_of: Callable[[str], list[str]],
                        ) -> list[tuple[tuple[int, float], str]]:
    """(score, sentence) for sentences of the member-richest passages that mention members;
    score = (distinct members mentioned, their summed centrality). `sentences_of(passage_id)`:
    the passage's summary_sentences, memoised by the caller across communities."""
    if not members:
        return []
    member_count: dict[str, int] = defaultdict(int)
    for e in members:
        for pid in e.passage_ids:
            member_count[pid] += 1
    pids = sorted((p for p in community.passage_ids if p in passages), key=lambda p: -member_count[p])[:CANDIDATE_PASSAGES]
    pattern, owner = _alias_pattern(members)
    scored, seen = [], set()
    for pid in pids:
        for sentence in sentences_of(pid):
            if sentence in seen:  # overlapping passages repeat sentences
                continue
            seen.add(sentence)
            found = {owner.get(m.group(0).lower()) for m in pattern.finditer(sentence)} - {None}
            if found:
                scored.append(((len(found), sum(weights.get(i, 0.0) for i in found)), sentence))
    scored.sort(key=lambda s: (-s[0][0], -s[0][1], s[1]))
    return scored


def _pick(scored: list[tuple[tuple[int, float], str]], n: int, embed: Embed | None) -> list[str]:
    sentences = [s for _, s in scored]
    if embed is None or len(sentences) <= n:
        return sentences[:n]
    pool = sentences[: n * CANDIDATES_PER_SENTENCE]
    vectors = np.asarray(embed(pool), dtype=np.float32)
    centroid = vectors.mean(axis=0)
    closeness = vectors @ (centroid / (np.linalg.norm(centroid) or 1.0))
    best = sorted(np.argsort(-closeness, kind="stable")[:n])  # keep coverage order among the chosen
    return [pool[i] for i in best]


def summarise_communities(graph: Graph, communities: list[Community], passages: list[Passage],
                          settings: CommunitySettings, embed: Embed | None = None) -> list[Community]:
    """Communities with extractive titles and summaries (new objects; the input is not modified)."""
    by_pid = {p.passage_id: p for p in passages}
    index = _GraphIndex(graph)
    split: dict[str, list[str]] = {}  # a passage is read by its communities at every level: split it once

    def sentences_of(pid: str) -> list[str]:
        if pid not in split:
            split[pid] = summary_sentences(by_pid[pid].text)
        return split[pid]

    out = []
    for community in communities:
        weights = index.centrality(community.entity_ids)
        ranked = index.ranked(community, weights)
        names = [e.name for e in ranked]
        title = ", ".join(names[:TITLE_ENTITIES]) or community.community_id
        scored = candidate_sentences(ranked, weights, by_pid, community, sentences_of)
        use_embed = embed if settings.summary_embed and len(ranked) > 1 else None
        sentences = _pick(scored, settings.summary_sentences, use_embed)
        shown = ", ".join(names[:SUMMARY_ENTITIES]) + (f" and {len(names) - SUMMARY_ENTITIES} more" if len(names) > SUMMARY_ENTITIES else "")
        summary = f"Entities: {shown}." + ("" if not sentences else " " + " ".join(sentences))
        out.append(dataclasses.replace(community, title=title, summary=summary))
    return out


def summary_inputs(graph: Graph, communities: list[Community]) -> list[tuple]:
    """Per community, everything its extractive title and summary are a function of: its members
    (names, aliases, mentions, passages), its passages and the weights inside it. A library
    re-summarises only the communities whose inputs changed (the others keep their summary)."""
    index = _GraphIndex(graph)
    out = []
    for c in communities:
        members = [index.entities[m] for m in c.entity_ids if m in index.entities]
        weights = sorted(index.centrality(c.entity_ids).items())
        out.append((tuple((e.entity_id, e.name, tuple(e.aliases), e.mentions, tuple(e.passage_ids)) for e in members),
                    tuple(c.passage_ids), tuple(weights)))
    return out
