"""Graph governance: alias merging, type and title guards, re-pointing, pruning, isolates."""
from __future__ import annotations

import random

import pytest

from pagerag.graph.govern import IN_PASSAGE, govern, govern_with_report
from pagerag.graph.ids import relation_id
from pagerag.records import Entity, Graph, Passage, Relation
from pagerag.settings import GovernSettings

PASSAGES = [Passage(f"p{i}", "doc", "mem", i * 100, i * 100 + 100, "x" * 100, 20, i) for i in range(6)]


def ent(name: str, type_: str = "PERSON", mentions: int = 3, pids: tuple[str, ...] = ("p0",)) -> Entity:
    eid = f"raw:{type_}:{name}"
    return Entity(eid, name, type_, [name], mentions, list(pids))


def rel(a: Entity, b: Entity, kind: str = "cooccurs", weight: float = 2.0, label: str = "co-occurs with",
        pids: tuple[str, ...] = ("p0",)) -> Relation:
    return Relation(relation_id(kind, a.entity_id, b.entity_id, label), a.entity_id, b.entity_id, label, kind, weight,
                    list(pids), [[pids[0], 0, 10]])


def by_alias(graph: Graph, alias: str, type_: str | None = None) -> Entity:
    found = [e for e in graph.entities if alias in e.aliases and (type_ is None or e.type == type_)]
    assert len(found) == 1, f"{alias}: {[(e.name, e.aliases) for e in graph.entities]}"
    return found[0]


@pytest.fixture(scope="session")
def embed():
    from pagerag.index.torch_encoder import get_embedder

    return get_embedder().encode


def test_scrooge_aliases_merge_into_one_person():
    forms = ["Scrooge", "Mr. Scrooge", "Ebenezer Scrooge", "SCROOGE", "Scrooge's", "Ebenezer"]
    raw = Graph(entities=[ent(f, mentions=10 if f == "Scrooge" else 2, pids=(f"p{i}",)) for i, f in enumerate(forms)])
    governed = govern(raw, PASSAGES, GovernSettings())
    [scrooge] = governed.entities
    assert scrooge.name == "Scrooge" and scrooge.type == "PERSON"
    assert set(forms) <= set(scrooge.aliases)
    assert scrooge.mentions == 10 + 2 * 5
    assert scrooge.passage_ids == [f"p{i}" for i in range(6)]
    assert scrooge.entity_id == "person:scrooge"


def test_possessive_case_and_title_variants_of_other_names():
    raw = Graph(entities=[ent("Marley"), ent("Marley's"), ent("MARLEY"), ent("Captain Ahab"), ent("Ahab")])
    governed = govern(raw, PASSAGES, GovernSettings())
    assert sorted(e.name for e in governed.entities) == ["Ahab", "Marley"]


def test_different_titles_are_different_people():
    raw = Graph(entities=[ent("Mr. Fezziwig", mentions=5), ent("Mrs. Fezziwig", mentions=5), ent("Fezziwig", mentions=2)])
    governed = govern(raw, PASSAGES, GovernSettings())
    assert len(governed.entities) == 3  # the bare name is ambiguous: left alone


def test_name_part_merges_only_when_unambiguous():
    raw = Graph(entities=[ent("Bob Cratchit"), ent("Peter Cratchit"), ent("Cratchit"), ent("Bob")])
    governed = govern(raw, PASSAGES, GovernSettings())
    assert set(by_alias(governed, "Bob").aliases) == {"Bob", "Bob Cratchit"}
    assert by_alias(governed, "Cratchit").aliases == ["Cratchit"]  # surname of two people
    assert by_alias(governed, "Peter Cratchit").aliases == ["Peter Cratchit"]


def test_no_merge_across_types():
    # Same name, balanced types, different passages: the man and the city stay apart.
    raw = Graph(entities=[ent("Washington", "PERSON", 5, ("p0", "p1")), ent("Washington", "GPE", 5, ("p2", "p3"))])
    governed = govern(raw, PASSAGES, GovernSettings())
    assert sorted(e.type for e in governed.entities) == ["GPE", "PERSON"]
    assert len({e.entity_id for e in governed.entities}) == 2


def test_ner_type_noise_on_one_name_is_repaired_by_share_or_shared_context():
    raw = Graph(entities=[
        ent("Queequeg", "PERSON", 20, ("p0", "p1", "p2")), ent("Queequeg", "GPE", 12, ("p1", "p2")),  # same passages
        ent("Queequeg", "NOUN_PHRASE", 40, ("p0", "p3")),  # capitalised: a name NER missed
        ent("Scrooge", "PERSON", 90, ("p4",)), ent("Scrooge", "ORG", 5, ("p5",)),  # 95% one type
    ])
    governed = govern(raw, PASSAGES, GovernSettings(type_repair_share=0.8, type_repair_context=0.5))
    assert sorted((e.name, e.type, e.mentions) for e in governed.entities) == [("Queequeg", "PERSON", 72), ("Scrooge", "PERSON", 95)]
    strict = govern(raw, PASSAGES, GovernSettings(type_repair_share=1.0, type_repair_context=1.01))
    assert len([e for e in strict.entities if e.name == "Queequeg"]) == 2  # only the untyped phrase joins


def test_noun_phrase_joins_the_named_entity_but_common_noun_stays():
    raw = Graph(entities=[ent("Scrooge", "PERSON", 30), ent("Scrooge", "NOUN_PHRASE", 4),
                          ent("Time", "ORG", 1), ent("time", "NOUN_PHRASE", 20)])
    governed = govern(raw, PASSAGES, GovernSettings())
    assert by_alias(governed, "Scrooge").mentions == 34
    assert by_alias(governed, "time").type == "NOUN_PHRASE"


def test_relations_are_repointed_merged_and_self_loops_dropped():
    scrooge, mr, marley = ent("Scrooge"), ent("Mr. Scrooge"), ent("Marley")
    raw = Graph(entities=[scrooge, mr, marley], relations=[
        rel(scrooge, marley, weight=2, pids=("p0",)), rel(mr, marley, weight=3, pids=("p1",)),
        rel(scrooge, mr, weight=5), rel(mr, marley, kind="svo", weight=1, label="see"),
    ])
    governed = govern(raw, PASSAGES, GovernSettings())
    assert len(governed.entities) == 2
    cooccurs = [r for r in governed.relations if r.kind == "cooccurs"]
    assert len(cooccurs) == 1 and cooccurs[0].weight == 5 and cooccurs[0].passage_ids == ["p0", "p1"]
    [svo] = [r for r in governed.relations if r.kind == "svo"]
    assert (svo.source, svo.label, svo.target) == ("person:scrooge", "see", "person:marley")
    assert all(r.source != r.target for r in governed.relations)


def test_single_mention_entities_are_pruned_unless_on_a_relation():
    hub, on_edge, alone = ent("Scrooge", mentions=9), ent("Belle", mentions=1), ent("Dilber", mentions=1, pids=("p5",))
    raw = Graph(entities=[hub, on_edge, alone], relations=[rel(hub, on_edge, kind="svo", weight=1, label="love")])
    governed, report = govern_with_report(raw, PASSAGES, GovernSettings())
    assert sorted(e.name for e in governed.entities) == ["Belle", "Scrooge"]
    assert report["pruned_entities"] == 1


def test_light_cooccurrence_edges_dropped_except_between_names():
    a, b = ent("Scrooge"), ent("Marley")
    c, d = ent("hand", "NOUN_PHRASE"), ent("door", "NOUN_PHRASE")
    raw = Graph(entities=[a, b, c, d], relations=[rel(a, b, weight=1), rel(c, d, weight=1), rel(a, c, weight=3)])
    governed = govern(raw, PASSAGES, GovernSettings(min_relation_weight=2.0))
    pairs = {frozenset((r.source, r.target)) for r in governed.relations if r.kind == "cooccurs"}
    assert frozenset(("person:scrooge", "person:marley")) in pairs
    assert frozenset(("noun-phrase:hand", "noun-phrase:door")) not in pairs
    assert frozenset(("person:scrooge", "noun-phrase:hand")) in pairs


def test_isolates_are_attached_to_their_passages():
    a, b = ent("Scrooge", mentions=9, pids=("p0", "p1")), ent("Marley", pids=("p0",))
    lonely = ent("Fred", mentions=4, pids=("p1", "p2"))
    raw = Graph(entities=[a, b, lonely], relations=[rel(a, b, weight=3)])
    governed, report = govern_with_report(raw, PASSAGES, GovernSettings())
    fred = by_alias(governed, "Fred")
    assert fred.passage_ids == ["p1", "p2"] and fred.description.startswith("attached to passages p1, p2")
    [link] = [r for r in governed.relations if r.kind == IN_PASSAGE]
    assert (link.source, link.target, link.passage_ids) == (fred.entity_id, "person:scrooge", ["p1"])
    assert link.evidence == [["p1", 100, 200]]  # the whole passage is the evidence
    assert raw.stats()["isolated"] == 1 and governed.stats()["isolated"] == 0
    assert report["attached"] == 1


def test_disabled_governance_returns_the_raw_graph():
    raw = Graph(entities=[ent("Scrooge"), ent("SCROOGE")])
    assert govern(raw, PASSAGES, GovernSettings(enabled=False)) is raw
    assert len(raw.entities) == 2


def test_ids_do_not_depend_on_input_order():
    entities = [ent(n) for n in ["Scrooge", "Mr. Scrooge", "Marley", "Jacob Marley", "Bob", "Bob Cratchit"]]
    relations = [rel(entities[0], entities[2]), rel(entities[4], entities[1])]
    first = govern(Graph(entities=list(entities), relations=list(relations)), PASSAGES, GovernSettings())
    random.Random(7).shuffle(entities)
    second = govern(Graph(entities=entities, relations=relations[::-1]), PASSAGES, GovernSettings())
    assert [(e.entity_id, e.aliases) for e in first.entities] == [(e.entity_id, e.aliases) for e in second.entities]
    assert [r.relation_id for r in first.relations] == [r.relation_id for r in second.relations]


def test_embedding_merge_needs_same_type_and_shared_passages(embed):
    raw = Graph(entities=[
        ent("counting-house", "NOUN_PHRASE", pids=("p0", "p1")), ent("counting house", "NOUN_PHRASE", pids=("p1",)),
        ent("door-knocker", "NOUN_PHRASE", pids=("p2",)), ent("door knocker", "NOUN_PHRASE", pids=("p3",)),
        ent("Tiny Tim", "PERSON", pids=("p4",)), ent("Tiny-Tim", "ORG", pids=("p4",)),  # cosine 0.93
    ])
    governed, report = govern_with_report(raw, PASSAGES, GovernSettings(embedding_merge_threshold=0.92), embed=embed)
    assert set(by_alias(governed, "counting house").aliases) == {"counting-house", "counting house"}
    assert by_alias(governed, "door knocker").aliases == ["door knocker"]  # no shared passage
    assert by_alias(governed, "Tiny-Tim").aliases == ["Tiny-Tim"]  # different types
    assert report["embedding_merges"] == 1


def test_similar_pairs_a_block_at_a_time_are_those_of_the_whole_matrix(monkeypatch):
    import numpy as np

    from pagerag.graph import name_pairs

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(1300, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    monkeypatch.setattr(name_pairs, "SIMILARITY_ROWS", 500)  # three blocks, the last one short
    got, computed = name_pairs.similar_among(vectors, np.arange(len(vectors)), 0.9)
    assert computed == 1300 * 1300
    rows, cols = np.nonzero(np.triu(vectors @ vectors.T, k=1) >= 0.9)
    assert len(got) > 100 and all(a < b for a, b, _ in got)
    assert {(a, b) for a, b, _ in got} == set(zip(rows.tolist(), cols.tolist()))


def test_similar_pairs_of_new_rows_are_those_the_whole_matrix_has_with_them():
    """An add computes only pairs with a new name (new x all): they are the whole matrix's pairs
    that touch a new row, with the same cosines, found once each."""
    import numpy as np

    from pagerag.graph import name_pairs

    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(400, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    whole, _ = name_pairs.similar_among(vectors, np.arange(400), 0.9)
    new = np.arange(300, 400)
    got, computed = name_pairs.similar_among(vectors, new, 0.9)
    assert computed == 100 * 400
    assert sorted(got) == sorted(p for p in whole if p[0] >= 300 or p[1] >= 300)
    assert len(got) == len(set((a, b) for a, b, _ in got)) > 10


def test_a_name_memo_read_back_gives_the_pairs_of_a_full_comparison(tmp_path):
    """A version keeps its names' pairs (and the vectors of names its entity tables lack); the
    next one, with new names, finds the pairs a comparison of everything finds, computing only
    new x all of their type."""
    import numpy as np

    from pagerag.graph.name_pairs import load_memo, name_pairs, save_memo

    rng = np.random.default_rng(2)
    base_vectors = rng.normal(size=(40, 8)).astype(np.float32)
    base_vectors[2] = base_vectors[0] + 0.01  # a pair among the old ORG names (even numbers)
    base_vectors[3] = base_vectors[1] + 0.01  # and one among the PERSON names
    base_vectors /= np.linalg.norm(base_vectors, axis=1, keepdims=True)
    table = {f"n{i}": v for i, v in enumerate(base_vectors)}
    table["new"] = table["n0"] + 0.02  # a new name alike to old ones
    table["new"] /= np.linalg.norm(table["new"])
    embedded: list[str] = []

    def embed(names):
        embedded.extend(names)
        return np.stack([table[n] for n in names])

    old_keys = sorted((("PERSON" if i % 2 else "ORG"), f"n{i}") for i in range(40))
    base = name_pairs(old_keys, embed, 0.9, "m")
    save_memo(base, tmp_path / "memo.npz", stored={n for _, n in old_keys if n != "n5"})  # n5: not in the tables
    known = load_memo(tmp_path / "memo.npz")
    assert known.vectors is None and set(known.carried) == {"n5"} and known.pairs == base.pairs
    keys = sorted(old_keys + [("ORG", "new")])
    embedded.clear()
    grown = name_pairs(keys, embed, 0.9, "m", known)
    assert "n5" not in embedded  # carried by the memo (the others come from the seeded embedder in a library)
    whole = name_pairs(keys, embed, 0.9, "m")
    assert grown.pairs == whole.pairs and len(grown.pairs) >= 3 and grown.stats["pairs_reused"] == 2
    assert grown.stats["names_new"] == 1 and grown.stats["cosines_computed"] == 21  # the new ORG name x 21 ORG names
