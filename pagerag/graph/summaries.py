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


class GraphIndex:
    """Entities by id and each entity's incident (neighbour, weight) pairs, built once per graph,
    so a community's centrality costs the degree of its members, not a scan of all relations."""

    def __init__(self, graph: Graph):
        self.entities = {e.entity_id: e for e in graph.entities}
        self.incident: dict[str, list[tuple[str, float]]] = defaultdict(list)
        self.known: dict[str, tuple[list[str], dict[str, float]]] = {}  # community id -> (its members, centrality)
        for r in graph.relations:
            if r.source != r.target:
                self.incident[r.source].append((r.target, r.weight))
                self.incident[r.target].append((r.source, r.weight))

    def community_centrality(self, community: Community) -> dict[str, float]:
        """centrality() of the community's members, as member_centralities found it for the same
        member list when it did (the content keys are computed first, for every community)."""
        found = self.known.get(community.community_id)
        if found is not None and found[0] is community.entity_ids:
            return found[1]
        return self.centrality(community.entity_ids)

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
    return GraphIndex(graph).centrality(entity_ids)


def summary_sentences(text: str) -> list[str]:
    """The sentences of a passage that could go in a summary (line wraps collapsed)."""
    out = []
    for start, end in split_sentences(text):
        sentence = " ".join(text[start:end].split())
        if len(sentence) > 20 and any(c.isalpha() for c in sentence):
            out.append(sentence[:MAX_SENTENCE_CHARS])
    return out


_WORD = re.compile(r"\w+")


class FormIndex:
    """Every name and alias of a graph's entities, found in a sentence by its first two words
    (one dictionary lookup per word of the sentence, not a regex of every member's names per
    community: compiling and running those was most of a library add's summaries, with thousands
    of alternatives in a large community's). A form matches as whole words, case-insensitively;
    overlapping forms all match (the regex took the leftmost-longest only). Each sentence is
    read once, whichever communities ask about it."""

    def __init__(self, entities: list[Entity]):
        self.owners: dict[str, list[str]] = defaultdict(list)  # form -> entity ids, in graph order
        self.by_start: dict[tuple[str, str], list[str]] = defaultdict(list)  # (first word, second or "") -> forms
        for e in entities:
            for form in dict.fromkeys(" ".join(f.split()).lower() for f in [e.name, *e.aliases]):
                words = _WORD.findall(form)
                if len(form) > 1 and words and form.startswith(words[0]) and form[-1:].isalnum():
                    if not self.owners[form]:
                        self.by_start[(words[0], words[1] if len(words) > 1 else "")].append(form)
                    self.owners[form].append(e.entity_id)
        self._found: dict[str, list[str]] = {}

    def forms_in(self, sentence: str) -> list[str]:
        """The forms in the sentence (each once)."""
        found = self._found.get(sentence)
        if found is None:
            lowered = sentence.lower()
            tokens = list(_WORD.finditer(lowered))
            found = []
            for i, token in enumerate(tokens):  # a \w+ run starts at a word boundary
                start = token.start()
                following = tokens[i + 1].group() if i + 1 < len(tokens) else ""
                for key in ((token.group(), following), (token.group(), "")):
                    for form in self.by_start.get(key, ()):
                        stop = start + len(form)
                        if lowered.startswith(form, start) and (stop == len(lowered) or not _is_word(lowered[stop])):
                            found.append(form)
            found = list(dict.fromkeys(found))
            self._found[sentence] = found
        return found


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def candidate_sentences(members: list[Entity], weights: dict[str, float], passages: dict[str, Passage],
                        community: Community, sentences_of: Callable[[str], list[str]], forms: FormIndex,
                        ) -> list[tuple[tuple[int, float], str]]:
    """(score, sentence) for sentences of the member-richest passages that mention members;
    score = (distinct members mentioned, their summed centrality). A form several members have
    counts for the most central of them. `sentences_of(passage_id)`: the passage's
    summary_sentences, memoised by the caller across communities."""
    if not members:
        return []
    member_count: dict[str, int] = defaultdict(int)
    for e in members:
        for pid in e.passage_ids:
            member_count[pid] += 1
    pids = sorted((p for p in community.passage_ids if p in passages), key=lambda p: -member_count[p])[:CANDIDATE_PASSAGES]
    rank = {e.entity_id: i for i, e in enumerate(members)}
    scored, seen = [], set()
    for pid in pids:
        for sentence in sentences_of(pid):
            if sentence in seen:  # overlapping passages repeat sentences
                continue
            seen.add(sentence)
            found = set()
            for form in forms.forms_in(sentence):
                owners = [o for o in forms.owners[form] if o in rank]
                if owners:
                    found.add(min(owners, key=rank.__getitem__))
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
                          settings: CommunitySettings, embed: Embed | None = None,
                          index: GraphIndex | None = None) -> list[Community]:
    """Communities with extractive titles and summaries (new objects; the input is not modified).
    `index`: the graph's GraphIndex, when the caller has made it already."""
    by_pid = {p.passage_id: p for p in passages}
    index = GraphIndex(graph) if index is None else index
    forms = FormIndex(graph.entities)
    split: dict[str, list[str]] = {}  # a passage is read by its communities at every level: split it once

    def sentences_of(pid: str) -> list[str]:
        if pid not in split:
            split[pid] = summary_sentences(by_pid[pid].text)
        return split[pid]

    out = []
    for community in communities:
        weights = index.community_centrality(community)
        ranked = index.ranked(community, weights)
        names = [e.name for e in ranked]
        title = ", ".join(names[:TITLE_ENTITIES]) or community.community_id
        scored = candidate_sentences(ranked, weights, by_pid, community, sentences_of, forms)
        use_embed = embed if settings.summary_embed and len(ranked) > 1 else None
        sentences = _pick(scored, settings.summary_sentences, use_embed)
        shown = ", ".join(names[:SUMMARY_ENTITIES]) + (f" and {len(names) - SUMMARY_ENTITIES} more" if len(names) > SUMMARY_ENTITIES else "")
        summary = f"Entities: {shown}." + ("" if not sentences else " " + " ".join(sentences))
        out.append(dataclasses.replace(community, title=title, summary=summary))
    return out


def summarised_communities(graph: Graph, passages: list[Passage], settings: CommunitySettings) -> list[Community]:
    """A graph's communities found afresh, with their titles and summaries, as a build makes the
    governed graph's: the raw graph's are made so when a question first reads them (a library
    does not keep them up to date on every add)."""
    from .communities import detect_communities

    return summarise_communities(graph, detect_communities(graph, settings), passages, settings)


def summary_inputs(graph: Graph, communities: list[Community], index: GraphIndex | None = None) -> list[tuple]:
    """Per community, everything its extractive title and summary are a function of: its members
    (names, aliases, mentions, passages), its passages and the weights inside it. A library
    re-summarises only the communities whose inputs changed (the others keep their summary)."""
    index = GraphIndex(graph) if index is None else index
    out = []
    for c, centrality in zip(communities, member_centralities(graph, communities, index)):
        members = [index.entities[m] for m in c.entity_ids if m in index.entities]
        weights = sorted(centrality.items())
        out.append((tuple((e.entity_id, e.name, tuple(e.aliases), e.mentions, tuple(e.passage_ids)) for e in members),
                    tuple(c.passage_ids), tuple(weights)))
    return out


def member_centralities(graph: Graph, communities: list[Community], index: GraphIndex) -> list[dict[str, float]]:
    """`index.centrality` of every community's members, the same values, a level at a time where
    it can (communities.inside_weights); a member without a relation inside keeps sum()'s integer
    0, which the content keys' JSON tells from 0.0. Kept in `index.known` for the summaries."""
    from .communities import inside_weights

    row: dict[str, int] = {}
    for c in communities:
        for m in c.entity_ids:
            row.setdefault(m, len(row))
    inner = [(row[r.source], row[r.target], r.weight) for r in graph.relations
             if r.source != r.target and r.source in row and r.target in row]
    columns = zip(*inner) if inner else ((), (), ())
    arrays = [np.array(col, dtype) for col, dtype in zip(columns, (np.int64, np.int64, np.float64))]
    out = [index.centrality(c.entity_ids) if inside is None else {m: w if n else 0 for m, (w, n) in inside.items()}
           for c, inside in zip(communities, inside_weights(communities, row, *arrays))]
    for c, centrality in zip(communities, out):
        index.known[c.community_id] = (c.entity_ids, centrality)
    return out
