"""Stage 6: graph governance — the RAW graph becomes the GOVERNED graph (paper: "graph governance").

1. Alias merging (same type): case, possessives, leading articles and titles ("Scrooge", "Mr.
   Scrooge", "SCROOGE", "Scrooge's"); a single-token PERSON name that is the first/last name of
   exactly one multi-token PERSON ("Scrooge" -> "Ebenezer Scrooge"); plural noun phrases onto their
   singular. Forms with different titles ("Mr. Fezziwig", "Mrs. Fezziwig") never merge.
2. Type repair (same name only, see `_repair_types`): a reading NER typed differently joins the
   dominant type when that type holds `type_repair_share` of the mentions or the two share context
   (`type_repair_context` of its passages); a capitalised noun phrase (a name NER missed) joins it
   too. Embedding merges never cross types.
3. Embedding merge: same type, cosine of names >= `embedding_merge_threshold`, and shared context
   (>= `min_shared_passages` common passages); two multi-token names that each have a word the
   other lacks ("Bob Cratchit", "Peter Cratchit") never merge.
4. Relations are re-pointed; self-loops dropped; parallel edges merged (weights summed).
5. Pruning: co-occurrence edges lighter than `min_relation_weight` are dropped unless both ends are
   named entities (`keep_named_pairs`) — a single shared sentence between two common nouns ("hand",
   "door") is mostly noise, between two characters it is news; then entities with fewer than
   `min_mentions` mentions that no longer sit on any relation.
6. Isolates are attached to their passages: an entity left without relations gets one relation of
   kind "in_passage" ("appears in the same passage as") to the entity it shares most passages with,
   its evidence being those whole passages, and a description "attached to passages …". Such an
   edge is weaker evidence than a sentence co-occurrence and is marked by its kind. An entity whose
   passages hold no other entity keeps only the description (it stays isolated in `stats()`).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from operator import attrgetter
from typing import Any, Callable

import numpy as np

from ..records import Entity, Graph, Passage, Relation
from ..settings import GovernSettings
from .extract_nlp import NOUN_PHRASE
from .ids import assign_entity_ids, relation_id
from .name_pairs import NameMemo, exact_cosines, name_pairs
from ..text.names import ParsedName, display_form, parse_name, singular_candidates

Embed = Callable[[list[str]], np.ndarray]
IN_PASSAGE = "in_passage"
NP_FOLD_SHARE = 2 / 3  # a common noun phrase joins a typed name holding this share of its typed mentions
NP_FOLD_TYPED_RATIO = 0.5  # ... and only if the name is typed at least half as often as it is not


class _Clusters:
    """Union-find over raw entity ids that refuses to join clusters whose titles imply different
    people (see names.TITLE_GROUPS)."""

    def __init__(self, entities: list[Entity], parsed: dict[str, ParsedName]):
        self.parent = {e.entity_id: e.entity_id for e in entities}
        self.titles = {e.entity_id: {parsed[e.entity_id].group} - {None} for e in entities}
        self.merges = 0

    def find(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb or len(self.titles[ra] | self.titles[rb]) > 1:
            return False
        root, child = min(ra, rb), max(ra, rb)  # the smaller id wins: deterministic
        self.parent[child] = root
        self.titles[root] |= self.titles.pop(child)
        self.merges += 1
        return True

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for x in sorted(self.parent):
            out[self.find(x)].append(x)
        return out


def govern(raw: Graph, passages: list[Passage], settings: GovernSettings, embed: Embed | None = None) -> Graph:
    """The governed graph (a new Graph; `raw` is not modified). Disabled = `raw` unchanged."""
    return govern_with_report(raw, passages, settings, embed)[0]


def govern_with_report(raw: Graph, passages: list[Passage], settings: GovernSettings,
                       embed: Embed | None = None) -> tuple[Graph, dict[str, Any]]:
    """The governed graph and what governance did (raw vs governed stats, merges, prunes)."""
    governed, report, _ = govern_library(raw, passages, settings, embed)
    return governed, report


def govern_library(raw: Graph, passages: list[Passage], settings: GovernSettings, embed: Embed | None = None,
                   names: NameMemo | None = None, model: str = "") -> tuple[Graph, dict[str, Any], NameMemo | None]:
    """govern_with_report, plus the names the embedding merge compared (None when it is off):
    given the base version's (`names`, embedded by `model`), only pairs with a new name are
    computed (name_pairs)."""
    if not settings.enabled:
        return raw, {"raw": raw.stats(), "governed": raw.stats(), "enabled": False}, None
    by_id = {e.entity_id: e for e in raw.entities}
    parsed = {e.entity_id: parse_name(e.name) for e in raw.entities}
    clusters = _Clusters(raw.entities, parsed)
    report: dict[str, Any] = {"enabled": True}
    if settings.merge_aliases:
        _merge_aliases(raw.entities, parsed, clusters, settings)
    report["alias_merges"] = clusters.merges
    memo = None
    if embed is not None and settings.embedding_merge_threshold < 1.0:
        report["embedding_merged_names"], memo = _merge_by_embedding(by_id, clusters, settings, embed, names, model)
        report["names_compared"] = memo.stats
    report["embedding_merges"] = clusters.merges - report["alias_merges"]
    order = {p.passage_id: i for i, p in enumerate(sorted(passages, key=lambda p: (p.doc_id, p.start, p.end)))}
    entities, new_id = _merged_entities(by_id, clusters, order)
    relations = _repointed_relations(raw.relations, new_id, order)
    n_relations = len(relations)
    named = {e.entity_id for e in entities if e.type != NOUN_PHRASE} if settings.keep_named_pairs else set()
    relations = [r for r in relations if r.kind != "cooccurs" or r.weight >= settings.min_relation_weight
                 or (r.source in named and r.target in named)]
    report["dropped_relations"] = n_relations - len(relations)
    linked = {r.source for r in relations} | {r.target for r in relations}
    kept = [e for e in entities if e.mentions >= settings.min_mentions or e.entity_id in linked]
    report["pruned_entities"] = len(entities) - len(kept)
    report["isolated_before_attach"] = sum(1 for e in kept if e.entity_id not in linked)
    if settings.attach_isolates:
        relations += attach_isolates(kept, linked, passages, order)
    governed = Graph(entities=kept, relations=sorted(relations, key=lambda r: r.relation_id))
    report["attached"] = sum(1 for r in governed.relations if r.kind == IN_PASSAGE)
    report["raw"], report["governed"] = raw.stats(), governed.stats()
    return governed, report, memo


# ------------------------------------------------------------------------------------------
# Merging


def _merge_aliases(entities: list[Entity], parsed: dict[str, ParsedName], clusters: _Clusters, settings: GovernSettings) -> None:
    by_id = {e.entity_id: e for e in entities}
    # (type, core, title group) -> ids: the finest group of surface variants of one name.
    variants: dict[tuple[str, str, str | None], list[str]] = defaultdict(list)
    for e in entities:
        p = parsed[e.entity_id]
        if p.core:
            variants[(e.type, p.core, p.group)].append(e.entity_id)
    titles_of: dict[tuple[str, str], set[str | None]] = defaultdict(set)
    for typ, core, title in variants:
        titles_of[(typ, core)].add(title)
    ambiguous = {key for key, titles in titles_of.items() if len(titles - {None}) > 1}
    # Case, possessive, article and (one-class) title variants of one name.
    for (typ, core, title), ids in sorted(variants.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")):
        for other in ids[1:]:
            clusters.union(ids[0], other)
        if (typ, core) not in ambiguous and title is not None and (typ, core, None) in variants:
            clusters.union(ids[0], variants[(typ, core, None)][0])
    _repair_types(variants, by_id, clusters, settings)
    _merge_name_parts(variants, ambiguous, {e.entity_id: e.mentions for e in entities}, clusters)
    for (typ, core, title), ids in sorted(variants.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")):
        if typ == NOUN_PHRASE and title is None:
            for singular in singular_candidates(core):
                if (NOUN_PHRASE, singular, None) in variants:
                    clusters.union(ids[0], variants[(NOUN_PHRASE, singular, None)][0])
                    break


def _repair_types(variants, by_id: dict[str, Entity], clusters: _Clusters, settings: GovernSettings) -> None:
    """One name, several NER types: the small spaCy model often types one character three ways
    ("Queequeg" PERSON, GPE, NORP). A typed reading joins the dominant one when it is a small
    minority (at most 1 - `type_repair_share` of the name's mentions, counting the untyped proper
    name's), or when it shares context: at least
    `type_repair_context` of its passages also hold the dominant reading (same name, same
    passages: NER disagreeing with itself). Balanced readings in different passages ("Washington"
    the man and the city) stay apart. A proper noun phrase (capitalised: a name NER missed) joins
    the dominant reading; a common one only when the name is mostly typed ("time" stays apart
    from a stray ORG "Time")."""
    by_name: dict[tuple[str, str | None], dict[str, list[str]]] = defaultdict(dict)
    for (typ, core, group), ids in variants.items():
        by_name[(core, group)][typ] = ids
    for (core, group), readings in sorted(by_name.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        mentions = {t: sum(by_id[i].mentions for i in ids) for t, ids in readings.items()}
        typed = {t: n for t, n in mentions.items() if t != NOUN_PHRASE}
        if not typed:
            continue
        dominant = max(typed, key=lambda t: (typed[t], t))
        share = typed[dominant] / sum(typed.values())
        proper = any(c.isupper() for i in readings.get(NOUN_PHRASE, ()) for c in by_id[i].name)
        total = sum(typed.values()) + (mentions[NOUN_PHRASE] if proper else 0)
        # The name's context: passages of its dominant reading and of the untyped proper name.
        context = {p for t in ([dominant, NOUN_PHRASE] if proper else [dominant]) for i in readings[t] for p in by_id[i].passage_ids}
        anchor = readings[dominant][0]
        for typ in sorted(typed):
            pids = {p for i in readings[typ] for p in by_id[i].passage_ids}
            shared = len(pids & context) / max(len(pids), 1)
            minority = typed[typ] / total <= 1.0 - settings.type_repair_share
            if typ != dominant and (minority or shared >= settings.type_repair_context):
                clusters.union(anchor, readings[typ][0])
        if NOUN_PHRASE in readings:
            mostly_typed = sum(typed.values()) >= NP_FOLD_TYPED_RATIO * mentions[NOUN_PHRASE] and share >= NP_FOLD_SHARE
            if proper or mostly_typed:
                clusters.union(anchor, readings[NOUN_PHRASE][0])


def _merge_name_parts(variants, ambiguous: set[tuple[str, str]], mentions: dict[str, int], clusters: _Clusters) -> None:
    """A one-word PERSON name joins the only multi-word PERSON name it is the first/last word of."""
    # Only established full names count: seen twice or more, no repeated word ("Scrooge Scrooge").
    multi = sorted({core for (typ, core, _), ids in variants.items() if typ == "PERSON" and len(core.split()) > 1
                    and len(set(core.split())) == len(core.split()) and sum(mentions[i] for i in ids) >= 2})
    by_part: dict[str, set[str]] = defaultdict(set)
    for core in multi:
        words = core.split()
        by_part[words[0]].add(core)
        by_part[words[-1]].add(core)
    # each full name's variants (all its titles), found once: scanning every variant for each
    # one-word name grew with the square of a library's names
    persons: dict[str, list[list[str]]] = defaultdict(list)
    for (t, c, _), ids in variants.items():
        if t == "PERSON":
            persons[c].append(ids)
    for (typ, core, title), ids in sorted(variants.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "")):
        if typ != "PERSON" or " " in core or (typ, core) in ambiguous or len(by_part.get(core, ())) != 1:
            continue
        full = next(iter(by_part[core]))
        if ("PERSON", full) in ambiguous:
            continue
        targets = persons.get(full)
        if targets:
            clusters.union(min(min(t) for t in targets), ids[0])


def _merge_by_embedding(by_id: dict[str, Entity], clusters: _Clusters, settings: GovernSettings, embed: Embed,
                        names: NameMemo | None, model: str) -> tuple[list[tuple[str, str]], NameMemo]:
    """Union same-type clusters with similar names and shared passages; returns the merged pairs
    and the names compared (for the next version: `names` is the base's, whose pairs are reused)."""
    groups = clusters.groups()
    roots = sorted(groups)
    name = {r: _best_name([by_id[m] for m in groups[r]]) for r in roots}
    typ = {r: _cluster_type([by_id[m] for m in groups[r]]) for r in roots}
    roots_of: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in roots:  # sorted, so each key's roots are too
        roots_of[(typ[r], name[r])].append(r)
    keys = sorted(roots_of)
    memo = name_pairs(keys, embed, settings.embedding_merge_threshold, model, names)
    passages: dict[str, set[str]] = {}

    def shared(ra: str, rb: str) -> int:  # only the candidates' passages are gathered
        for r in (ra, rb):
            if r not in passages:
                passages[r] = set().union(*(by_id[m].passage_ids for m in groups[r]))
        return len(passages[ra] & passages[rb])

    pairs: list[tuple[float, str, str]] = []
    for sim, ra, rb in _root_pairs(memo, keys, roots_of, settings.embedding_merge_threshold):
        words_a, words_b = set(parse_name(name[ra]).tokens), set(parse_name(name[rb]).tokens)
        if shared(ra, rb) >= settings.min_shared_passages and _compatible_words(words_a, words_b):
            pairs.append((-sim, ra, rb))
    merged_names: list[tuple[str, str]] = []
    for _, ra, rb in sorted(pairs):
        if clusters.union(ra, rb):
            merged_names.append((name[ra], name[rb]))
    return merged_names, memo


def _root_pairs(memo: NameMemo, keys, roots_of, threshold: float):
    """(cosine, root a, root b), a < b, for every two clusters whose names are alike: the memo's
    name pairs, and clusters of one name (kept apart by their titles) with each other."""
    for i, key in enumerate(keys):
        rs = roots_of[key]
        if len(rs) > 1:
            v = memo.vectors[i:i + 1]
            sim = float(exact_cosines(v, v)[0])
            if sim >= threshold:
                yield from ((sim, a, b) for n, a in enumerate(rs) for b in rs[n + 1:])
    for i, j, sim in memo.pairs:
        for ra in roots_of[keys[i]]:
            for rb in roots_of[keys[j]]:
                yield (sim, min(ra, rb), max(ra, rb))


def _compatible_words(a: set[str], b: set[str]) -> bool:
    """False for two multi-word names that each have a word the other lacks (different people)."""
    return not (len(a) > 1 and len(b) > 1 and a - b and b - a)


# ------------------------------------------------------------------------------------------
# Building the governed entities and relations


def _cluster_type(members: list[Entity]) -> str:
    typed = Counter()
    for e in members:
        if e.type != NOUN_PHRASE:
            typed[e.type] += e.mentions
    return max(typed.items(), key=lambda kv: (kv[1], kv[0]))[0] if typed else NOUN_PHRASE


def _best_name(members: list[Entity]) -> str:
    """The most mentioned display form (possessive removed); ties: no title, not all-caps, longer."""
    counts: Counter = Counter()
    for e in members:
        counts[display_form(e.name)] += e.mentions
    return min(counts, key=lambda n: (-counts[n], parse_name(n).title is not None, n.isupper(), -len(n), n))


def _merged_entities(by_id: dict[str, Entity], clusters: _Clusters, order: dict[str, int]) -> tuple[list[Entity], dict[str, str]]:
    groups = clusters.groups()
    merged: dict[str, Entity] = {}
    for root, ids in groups.items():
        members = [by_id[i] for i in ids]
        aliases = sorted({a for e in members for a in [e.name, *e.aliases]})
        pids = in_passage_order({p for e in members for p in e.passage_ids}, order)
        merged[root] = Entity("", _best_name(members), _cluster_type(members), aliases,
                              sum(e.mentions for e in members), pids)
    keys = {root: (e.name, e.type) for root, e in merged.items()}
    ids = assign_entity_ids(list(keys.values()), {keys[r]: e.mentions for r, e in merged.items()})
    for root, e in merged.items():
        e.entity_id = ids[keys[root]]
    new_id = {member: merged[root].entity_id for root, members in groups.items() for member in members}
    return sorted(merged.values(), key=lambda e: e.entity_id), new_id


def _repointed_relations(relations: list[Relation], new_id: dict[str, str], order: dict[str, int]) -> list[Relation]:
    """The raw relations moved onto the merged entities and summed per (kind, source, target,
    label), in the raw relations' order: weights added, passages joined, evidence kept up to the
    longest raw relation's count without repeats. Written for speed (a library's ~400k raw
    relations at 1,000 documents): the raw relation's lists are copied into a new record, not
    extended into an empty one."""
    cap = max(map(len, map(attrgetter("evidence"), relations)), default=1) or 1
    merged: dict[tuple[str, str, str, str], Relation] = {}
    find, get = new_id.get, merged.get
    for r in relations:
        s, t = find(r.source), find(r.target)
        if s is None or t is None or s == t:
            continue
        kind, label = r.kind, r.label
        if kind == "cooccurs" and s > t:
            s, t = t, s
        key = (kind, s, t, label)
        out = get(key)
        if out is None:
            merged[key] = Relation(relation_id(kind, s, t, label), s, t, label, kind, r.weight, list(r.passage_ids),
                                   _distinct_spans(r.evidence, [], cap))
            continue
        out.weight += r.weight
        out.passage_ids += r.passage_ids
        if len(out.evidence) < cap:
            _distinct_spans(r.evidence, out.evidence, cap)
    for r in merged.values():
        r.passage_ids = in_passage_order(set(r.passage_ids), order)
    return list(merged.values())


def in_passage_order(passage_ids: set[str], order: dict[str, int]) -> list[str]:
    """The passages in the library's order; any it does not have, last."""
    try:
        return sorted(passage_ids, key=order.__getitem__)
    except KeyError:
        return sorted(passage_ids, key=lambda p: order.get(p, len(order)))


def _distinct_spans(spans: list, into: list, cap: int) -> list:
    """`into` with each span of `spans` it lacks appended, while it holds fewer than `cap`."""
    for span in spans:
        if len(into) >= cap:
            break
        if span not in into:
            into.append(span)
    return into


def attach_isolates(entities: list[Entity], linked: set[str], passages: list[Passage], order: dict[str, int],
                    max_evidence: int = 3) -> list[Relation]:
    """One "in_passage" relation per isolated entity to the entity it shares most passages with
    (preferring entities that already have relations); every isolate gets a description."""
    span = {p.passage_id: [p.passage_id, p.start, p.end] for p in passages}
    in_passage: dict[str, list[Entity]] = defaultdict(list)
    for e in entities:
        for pid in e.passage_ids:
            in_passage[pid].append(e)
    added: list[Relation] = []
    attached: set[str] = set()  # two isolates sharing a passage are linked once, not twice
    for e in entities:
        if e.entity_id in linked or e.entity_id in attached:
            continue
        shown = ", ".join(e.passage_ids[:5]) + (" …" if len(e.passage_ids) > 5 else "")
        e.description = f"attached to passages {shown}" if e.passage_ids else e.description
        shared: dict[str, list[str]] = defaultdict(list)
        for pid in e.passage_ids:
            for other in in_passage[pid]:
                if other.entity_id != e.entity_id:
                    shared[other.entity_id].append(pid)
        if not shared:
            continue
        mentions = {o.entity_id: o.mentions for pid in e.passage_ids for o in in_passage[pid]}
        partner = min(shared, key=lambda o: (-len(shared[o]), o not in linked, -mentions[o], o))
        pids = sorted(shared[partner], key=lambda p: order.get(p, len(order)))
        added.append(Relation(relation_id(IN_PASSAGE, e.entity_id, partner), e.entity_id, partner,
                              "appears in the same passage as", IN_PASSAGE, float(len(pids)), pids,
                              [span[p] for p in pids[:max_evidence] if p in span]))
        attached.update((e.entity_id, partner))
    return added
