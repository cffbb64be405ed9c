"""The nlp extractor on small texts with the real spaCy pipeline (loaded once per session)."""
from __future__ import annotations

import pytest

from pagerag.graph.extract_nlp import NOUN_PHRASE, extract_nlp, load_nlp
from pagerag.graph.regions import PassageLocator, source_regions, split_pieces
from pagerag.records import Graph, Passage
from pagerag.settings import ExtractSettings


@pytest.fixture(scope="session")
def nlp():
    return load_nlp(ExtractSettings().spacy_model)


def passages_of(text: str, size: int = 400, overlap: int = 0, doc_id: str = "doc") -> list[Passage]:
    """Honest windows of `text`: passage.text == text[start:end]."""
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + size)
        out.append(Passage(f"{doc_id}-{len(out)}", doc_id, "mem", start, end, text[start:end], 0, len(out)))
        if end == len(text):
            break
        start = end - overlap
    return out


def entity(graph: Graph, name: str, type_: str | None = None):
    found = [e for e in graph.entities if e.name == name and (type_ is None or e.type == type_)]
    assert found, f"{name} not among {[(e.name, e.type) for e in graph.entities]}"
    return found[0]


def test_svo_triple_from_a_simple_sentence(nlp):
    text = "Scrooge saw Marley in the office. Marley was seen by Bob."
    graph = extract_nlp(passages_of(text), ExtractSettings(n_process=1))
    names = {e.entity_id: e.name for e in graph.entities}
    triples = {(names[r.source], r.label, names[r.target]) for r in graph.relations if r.kind == "svo"}
    assert ("Scrooge", "see", "Marley") in triples
    # The passive is turned around: Bob is the one who sees.
    assert ("Bob", "see", "Marley") in triples


def test_cooccurrence_weight_counts_sentences_and_evidence_points_at_them(nlp):
    text = ("Scrooge met Marley at noon. The fog was thick. Marley and Scrooge walked home. "
            "Scrooge slept alone. Later Scrooge thought of Marley again.")
    graph = extract_nlp(passages_of(text, size=60), ExtractSettings(n_process=1))
    a, b = entity(graph, "Scrooge"), entity(graph, "Marley")
    [edge] = [r for r in graph.relations if r.kind == "cooccurs" and {r.source, r.target} == {a.entity_id, b.entity_id}]
    assert edge.weight == 3.0
    assert edge.label == "co-occurs with"
    for passage_id, start, end in edge.evidence:
        sentence = text[start:end]
        assert "Scrooge" in sentence and "Marley" in sentence
        assert passage_id in edge.passage_ids
    assert len(edge.evidence) == 3


def test_evidence_is_capped_and_mentions_counted_once_across_overlapping_passages(nlp):
    sentence = "Scrooge spoke to Marley. "
    text = sentence * 8
    passages = passages_of(text, size=100, overlap=40)
    graph = extract_nlp(passages, ExtractSettings(n_process=1, max_evidence=2))
    scrooge = entity(graph, "Scrooge")
    assert scrooge.mentions == 8  # overlap is read once, not twice
    [edge] = [r for r in graph.relations if r.kind == "cooccurs"]
    assert edge.weight == 8 and len(edge.evidence) == 2
    # A mention inside an overlap belongs to both passages that hold it.
    assert set(scrooge.passage_ids) == {p.passage_id for p in passages}


def test_noun_phrases_need_min_count_and_lose_determiners(nlp):
    text = ("The lantern swung. A lantern fell. His lantern broke. "
            "The kettle sang. The kettle cooled. Scrooge sat by the lantern.")
    graph = extract_nlp(passages_of(text), ExtractSettings(n_process=1, min_noun_phrase_count=3))
    phrases = {e.name for e in graph.entities if e.type == NOUN_PHRASE}
    assert "lantern" in phrases
    assert "kettle" not in phrases  # twice only
    assert entity(graph, "lantern").mentions == 4


def test_titles_stay_with_person_names(nlp):
    text = "Mr. Fezziwig danced with Mrs. Fezziwig. Mrs. Fezziwig laughed and Mr. Fezziwig bowed."
    graph = extract_nlp(passages_of(text), ExtractSettings(n_process=1))
    names = {e.name for e in graph.entities if e.type == "PERSON"}
    assert {"Mr. Fezziwig", "Mrs. Fezziwig"} <= names


def test_progress_reports_every_passage_once(nlp):
    text = "Scrooge counted coins. " * 60
    passages = passages_of(text, size=200, overlap=20)
    seen: list[int] = []
    extract_nlp(passages, ExtractSettings(n_process=1, piece_chars=300), progress=seen.append)
    assert sum(seen) == len(passages) and len(seen) > 1


def test_entity_ids_are_deterministic_and_distinct(nlp):
    text = "Scrooge saw Marley. SCROOGE shouted at Marley. Scrooge and Marley argued."
    first = extract_nlp(passages_of(text), ExtractSettings(n_process=1))
    second = extract_nlp(passages_of(text), ExtractSettings(n_process=1))
    assert [e.entity_id for e in first.entities] == [e.entity_id for e in second.entities]
    assert len({e.entity_id for e in first.entities}) == len(first.entities)
    assert [r.relation_id for r in first.relations] == [r.relation_id for r in second.relations]


def test_regions_and_pieces_keep_exact_offsets():
    text = ("First paragraph line one.\nline two.\n\n" + "Second paragraph is longer. " * 30 + "\n\nThird.")
    passages = passages_of(text, size=150, overlap=30)
    [region] = source_regions(passages)
    assert region.start == 0 and region.text == text
    pieces = split_pieces(region, 200)
    assert "".join(p.text for p in pieces) == text
    assert all(text[p.start : p.start + len(p.text)] == p.text for p in pieces)
    assert all(len(p.text) <= 200 for p in pieces)


def test_locator_finds_containing_then_overlapping_passages():
    text = "x" * 300
    passages = passages_of(text, size=100, overlap=20)  # 0-100, 80-180, 160-260, 240-300
    locator = PassageLocator(passages)
    assert locator.containing(85, 95) == ["doc-0", "doc-1"]
    assert locator.containing(10, 20) == ["doc-0"]
    assert locator.containing(90, 170) == ["doc-1"]
    assert locator.containing(50, 150) == ["doc-0", "doc-1"]  # straddles: the ones it overlaps


def test_verbs_and_possessives_are_trimmed_from_the_end_of_names(nlp):
    from pagerag.graph.extract_nlp import _trimmed_end

    doc = nlp("Scrooge muttered that Bob Cratchit's wife was kind.")
    assert doc[0:_trimmed_end(doc, 0, 2)].text == "Scrooge"  # NER's "Scrooge muttered"
    bob = [t.i for t in doc if t.text == "Bob"][0]
    assert doc[bob:_trimmed_end(doc, bob, bob + 3)].text == "Bob Cratchit"
    assert doc[bob:_trimmed_end(doc, bob, bob + 2)].text == "Bob Cratchit"  # names are kept whole


def test_llm_replies_keep_only_offered_types_and_one_entity_per_name():
    # What the local 1.5B returned on a health primer: the whole type list copied, and the same
    # thing typed differently in two passages.
    from pagerag.graph.extract_llm import _collect, _to_graph, entity_type

    assert entity_type("ORG|GPE|LOC|EVENT|OB") == "CONCEPT" and entity_type("person") == "PERSON"
    assert entity_type(None) == "CONCEPT" and entity_type("ANIMAL") == "CONCEPT"
    p1 = Passage("d-0", "d", "mem", 0, 30, "The bones and muscles move.", 0, 0)
    p2 = Passage("d-1", "d", "mem", 30, 60, "Bones hold the body up.", 0, 1)
    state = ({}, {}, {}, {})
    _collect({"entities": [{"name": "bones", "type": "OBJECT", "description": "hard parts"},
                           {"name": "muscles", "type": "ORG|GPE|LOC|EVENT|OB"}],
              "relations": [{"source": "muscles", "target": "bones", "label": "move"}]}, p1, *state)
    _collect({"entities": [{"name": "Bones", "type": "CONCEPT"}, {"name": "body", "type": "OBJECT"},
                           {"name": "bones", "type": "OBJECT"}],
              "relations": [{"source": "bones", "target": "body", "label": "hold up"}]}, p2, *state)
    graph = _to_graph(*state)
    by_name = {e.name.lower(): e for e in graph.entities}
    assert sorted(by_name) == ["body", "bones", "muscles"]  # "Bones" CONCEPT merged into bones OBJECT
    assert by_name["bones"].type == "OBJECT" and by_name["bones"].mentions == 3
    assert by_name["bones"].passage_ids == ["d-0", "d-1"] and by_name["bones"].description == "hard parts"
    assert by_name["muscles"].type == "CONCEPT"
    ends = {(r.source, r.target) for r in graph.relations}
    assert ends == {(by_name["muscles"].entity_id, by_name["bones"].entity_id),
                    (by_name["bones"].entity_id, by_name["body"].entity_id)}
