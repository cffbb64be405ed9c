"""The `llm` extractor: one prompt per passage (prompts/extract_graph.txt), JSON out, through any
configured LLM backend. Responses are cached on disk by prompt hash (pagerag/llm/cache.py), so a
re-run or a resumed build pays no token twice. Produces the same raw Graph as extract_nlp, so
governance and communities run unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import BackendError
from ..records import Entity, Graph, Passage, Relation
from .ids import assign_entity_ids, relation_id

# The types prompts/extract_graph.txt offers. A small model often copies the whole list
# ("ORG|GPE|LOC|EVENT|OB", seen with the local 1.5B) or invents one: that is no choice, so CONCEPT.
ENTITY_TYPES = ("PERSON", "ORG", "GPE", "LOC", "EVENT", "OBJECT", "CONCEPT")


@dataclass
class ExtractionCost:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    failures: int = 0


def extract_llm(passages: list[Passage], llm, progress: Callable[[int], None] | None = None,
                cost: ExtractionCost | None = None, max_tokens: int = 700) -> Graph:
    """Raw graph from LLM-extracted entities and relations, with passage provenance."""
    from ..llm import complete_json, render_prompt

    cost = cost if cost is not None else ExtractionCost()
    entities: dict[tuple[str, str], set[str]] = {}
    counts: dict[tuple[str, str], int] = {}
    descriptions: dict[tuple[str, str], str] = {}
    edges: dict[tuple[tuple[str, str], tuple[str, str], str], set[str]] = {}
    for passage in passages:
        messages = render_prompt("extract_graph", passage=passage.text)
        try:
            reply, completion = complete_json(llm, messages, max_tokens=max_tokens, required=("entities",))
        except BackendError:
            cost.failures += 1  # one bad reply must not sink a whole book; the floor still has the passage
            if progress:
                progress(1)
            continue
        cost.calls += 1
        if not completion.cached:
            cost.prompt_tokens += completion.prompt_tokens
            cost.completion_tokens += completion.completion_tokens
        _collect(reply, passage, entities, counts, descriptions, edges)
        if progress:
            progress(1)
    return _to_graph(entities, counts, descriptions, edges)


def _clean(name: object) -> str:
    return " ".join(str(name or "").split()).strip(" .,;:'\"")


def _collect(reply: dict, passage: Passage, entities, counts, descriptions, edges) -> None:
    by_name: dict[str, tuple[str, str]] = {}
    for item in reply.get("entities") or []:
        if not isinstance(item, dict):
            continue
        name = _clean(item.get("name"))
        if not name or len(name) > 80:
            continue
        key = (name, entity_type(item.get("type")))
        entities.setdefault(key, set()).add(passage.passage_id)
        counts[key] = counts.get(key, 0) + 1
        descriptions.setdefault(key, _clean(item.get("description"))[:200])
        by_name[name.lower()] = key
    for item in reply.get("relations") or []:
        if not isinstance(item, dict):
            continue
        source = by_name.get(_clean(item.get("source")).lower())
        target = by_name.get(_clean(item.get("target")).lower())
        label = _clean(item.get("label"))[:60] or "related to"
        if source and target and source != target:
            edges.setdefault((source, target, label.lower()), set()).add(passage.passage_id)


def entity_type(raw: object) -> str:
    """One of ENTITY_TYPES: the model's type when it chose one of them, else CONCEPT."""
    t = str(raw or "").strip().upper()
    return t if t in ENTITY_TYPES else "CONCEPT"


def merge_types(entities, counts, descriptions, edges):
    """One entity per name (case-insensitive): passages type "bones" OBJECT in one reply and
    CONCEPT in the next; the name keeps the type it was given most often (then the first in
    ENTITY_TYPES) and gathers the others' passages, mentions and edges."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for key in entities:
        groups.setdefault(key[0].lower(), []).append(key)
    canon = {}
    for keys in groups.values():
        best = min(keys, key=lambda k: (-counts[k], ENTITY_TYPES.index(k[1]), k[0]))
        canon.update({k: best for k in keys})
    merged: dict[tuple[str, str], set[str]] = {}
    merged_counts: dict[tuple[str, str], int] = {}
    merged_desc: dict[tuple[str, str], str] = {}
    for key in sorted(entities, key=lambda k: (-counts[k], k)):
        target = canon[key]
        merged.setdefault(target, set()).update(entities[key])
        merged_counts[target] = merged_counts.get(target, 0) + counts[key]
        if descriptions.get(key) and not merged_desc.get(target):
            merged_desc[target] = descriptions[key]
    merged_edges: dict = {}
    for (source, target, label), pids in edges.items():
        a, b = canon[source], canon[target]
        if a != b:
            merged_edges.setdefault((a, b, label), set()).update(pids)
    return merged, merged_counts, merged_desc, merged_edges


def _to_graph(entities, counts, descriptions, edges) -> Graph:
    entities, counts, descriptions, edges = merge_types(entities, counts, descriptions, edges)
    ids = assign_entity_ids(sorted(entities), counts)
    graph = Graph()
    for key in sorted(entities, key=lambda k: ids[k]):
        graph.entities.append(Entity(entity_id=ids[key], name=key[0], type=key[1], aliases=[key[0]],
                                     mentions=counts[key], passage_ids=sorted(entities[key]),
                                     description=descriptions.get(key, "")))
    for (source, target, label), pids in sorted(edges.items(), key=lambda kv: (ids[kv[0][0]], ids[kv[0][1]], kv[0][2])):
        graph.relations.append(Relation(relation_id=relation_id("svo", ids[source], ids[target], label),
                                        source=ids[source], target=ids[target], label=label, kind="svo",
                                        weight=float(len(pids)), passage_ids=sorted(pids)))
    return graph
