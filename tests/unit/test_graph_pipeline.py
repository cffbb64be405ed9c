"""Stages 5-8 on a real excerpt of A Christmas Carol: extract -> govern -> communities -> summaries."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from pagerag.graph.communities import detect_communities
from pagerag.graph.extract_nlp import extract_nlp
from pagerag.graph.govern import govern_with_report
from pagerag.graph.provenance import provenance_problems
from pagerag.graph.summaries import summarise_communities
from pagerag.records import Graph, Passage
from pagerag.settings import CommunitySettings, ExtractSettings, GovernSettings

EXCERPT_CHARS = 45_000  # Marley's ghost, the counting-house, Fezziwig's ball: ~8k words


def honest_passages(text: str, size: int = 1000, overlap: int = 150) -> list[Passage]:
    """~size-char windows cut at spaces, overlapping by ~overlap chars; text == source[start:end]."""
    out, start = [], 0
    while start < len(text):
        end = len(text) if start + size >= len(text) else text.rfind(" ", start + size // 2, start + size) + 1
        out.append(Passage(f"carol-{len(out):04d}", "carol", "christmas_carol.txt", start, end, text[start:end], 0, len(out)))
        if end >= len(text):
            break
        start = text.find(" ", end - overlap) + 1
    return out


@pytest.fixture(scope="module")
def carol(data_dir: Path) -> tuple[str, list[Passage]]:
    path = data_dir / "books" / "christmas_carol.txt"
    if not path.is_file():
        pytest.skip(f"{path} not found in PAGERAG_DATA_DIR")
    text = path.read_text(encoding="utf-8")
    body = text.find("STAVE ONE") if "STAVE ONE" in text else 0
    text = text[: text.find("\n\n", body + EXCERPT_CHARS)]
    return text, [p for p in honest_passages(text) if p.end > body]


@pytest.fixture(scope="module")
def graphs(carol) -> tuple[Graph, Graph, dict]:
    from pagerag.index.torch_encoder import get_embedder

    _, passages = carol
    raw = extract_nlp(passages, ExtractSettings(n_process=1))
    governed, report = govern_with_report(raw, passages, GovernSettings(), embed=get_embedder().encode)
    return raw, governed, report


def test_governed_graph_is_smaller_and_less_fragmented_than_raw(graphs):
    raw, governed, report = graphs
    assert governed.stats()["entities"] < raw.stats()["entities"]
    assert governed.stats()["isolated"] < raw.stats()["isolated"]
    assert governed.stats()["relations"] < raw.stats()["relations"]
    assert report["raw"] == raw.stats() and report["governed"] == governed.stats()
    assert report["alias_merges"] > 0


def test_scrooge_is_one_governed_person_with_his_aliases(graphs):
    raw, governed, _ = graphs
    raw_forms = {e.name for e in raw.entities if e.type == "PERSON" and "scrooge" in e.name.lower()}
    assert len(raw_forms) > 1  # the raw graph really has the duplicates
    [scrooge] = [e for e in governed.entities if e.name == "Scrooge" and e.type == "PERSON"]
    assert {"Scrooge", "Mr. Scrooge"} <= set(scrooge.aliases)
    assert scrooge.entity_id == "person:scrooge"


def test_relations_carry_sentence_evidence_from_the_source(carol, graphs):
    text, passages = carol
    raw, governed, _ = graphs
    names = {e.entity_id: e for e in raw.entities}
    checked = 0
    for r in raw.relations:
        if r.kind != "cooccurs":
            continue
        for _, start, end in r.evidence:
            sentence = " ".join(text[start:end].split()).lower()
            for node in (names[r.source], names[r.target]):
                assert node.name.lower() in sentence, (node.name, sentence)
            checked += 1
    assert checked > 100
    assert provenance_problems(raw, passages) == [] and provenance_problems(governed, passages) == []


def test_svo_relations_read_like_the_book(graphs):
    raw, _, _ = graphs
    names = {e.entity_id: e.name for e in raw.entities}
    triples = [(names[r.source], r.label, names[r.target]) for r in raw.relations if r.kind == "svo"]
    assert len(triples) > 20
    assert all(re.fullmatch(r"[a-z][a-z-]*( [a-z]+)?", label) for _, label, _ in triples)
    assert any(s == "Scrooge" for s, _, _ in triples)


def test_communities_and_summaries_keep_provenance(carol, graphs):
    _, passages = carol
    _, governed, _ = graphs
    settings = CommunitySettings()
    first = detect_communities(governed, settings)
    assert first == detect_communities(governed, settings)  # deterministic on a real graph
    communities = summarise_communities(governed, first, passages, settings)
    known = {p.passage_id for p in passages}
    covered = {e for c in communities if c.level == 0 for e in c.entity_ids}
    assert covered == {e.entity_id for e in governed.entities}  # every entity has a level-0 community
    names = {e.entity_id: e.name for e in governed.entities}
    for c in communities:
        assert c.passage_ids and set(c.passage_ids) <= known
        assert c.title.split(", ")[0] in {names[m] for m in c.entity_ids}
        assert c.summary.startswith("Entities: ")
    governed.communities = communities
    assert provenance_problems(governed, passages) == []


def test_governance_of_a_raw_graph_left_unsorted_is_the_same(carol, graphs):
    """A library builds its raw graph with each relation's passages unsorted and repeated
    (ordered_passages=False), since governance sorts the lists it makes: the governed graph
    must be exactly the one made from the sorted raw graph."""
    from pagerag.graph.extract_nlp import build_raw_graph, collect_mentions, merge_mentions
    from pagerag.index.torch_encoder import get_embedder

    _, passages = carol
    raw, governed, report = graphs
    settings = ExtractSettings(n_process=1)
    acc = merge_mentions(collect_mentions(passages, settings))
    loose = build_raw_graph(acc, passages, settings, ordered_passages=False)
    assert [r.relation_id for r in loose.relations] == [r.relation_id for r in raw.relations]
    # the loose lists do repeat passages (a pair met in several sentences of one passage)
    assert any(len(r.passage_ids) > len(set(r.passage_ids)) for r in loose.relations)
    again, again_report = govern_with_report(loose, passages, GovernSettings(), embed=get_embedder().encode)
    assert again.entities == governed.entities and again.relations == governed.relations
    timed = "names_compared"  # holds the seconds its cosines took
    assert {k: v for k, v in again_report.items() if k != timed} == {k: v for k, v in report.items() if k != timed}
