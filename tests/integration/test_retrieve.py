"""Retrieval on a real repository (Christmas Carol excerpt: real spaCy graph, embedder, LanceDB).

Every operator runs on it; the graph operators return passages the text floor misses; presets
change the plan; the budget holds; every quote is the source text at its span; bad input gives
one clear error.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from pagerag.errors import InputError, PageRAGError, RepositoryError
from pagerag.retrieve import graph_operators, operators
from pagerag.retrieve.analyse import analyse, prototype_scores, prototype_vectors
from pagerag.retrieve.api import get_encoder, retrieve
from pagerag.retrieve.plan import plan
from pagerag.records import NEEDS
from pagerag.retrieve.rerank import score_windows
from pagerag.retrieve.state import get_state
from pagerag.settings import load_settings

RELATIONAL = "How is Scrooge related to his nephew Fred?"
GLOBAL = "What are the main themes of the story?"


@pytest.fixture(scope="session")
def settings():
    return load_settings(environ={})


@pytest.fixture(scope="session")
def encode(settings):
    return get_encoder(settings)


@pytest.fixture(scope="session")
def state(carol_repo):
    return get_state(carol_repo)


def _query(question, state, settings, encode, need=None):
    analysis, linked = analyse(question, state, settings, encode)
    if need:
        analysis.need = need
    return operators.Query(analysis.question, linked.question_vec, analysis, state, plan(analysis, settings), settings,
                           encode), linked


def _text_rows(query):
    k = query.plan.top_k
    dense = operators.dense_search(query, k)
    return operators.text_floor(query, dense, operators.lexical_search(query, k))


def test_analysis_links_named_characters(state, settings, encode):
    analysis, linked = analyse(RELATIONAL, state, settings, encode)
    names = {l.name.lower() for l in analysis.links}
    assert any("scrooge" in n for n in names)
    for link in analysis.links:
        assert RELATIONAL[link.start : link.end] == link.mention and 0 < link.score <= 1
    assert analysis.need == "relational" and analysis.decided_by == "rules"
    assert linked.question_vec.shape == (state.vectors.shape[1],)
    assert abs(float(np.linalg.norm(linked.question_vec)) - 1) < 1e-3


def test_prototype_classifier_recognises_its_own_examples(settings, encode):
    labels, vectors = prototype_vectors(settings.embed.model, encode)
    assert set(labels) == set(NEEDS) and len(labels) >= 4 * 20
    hits = sum(max(prototype_scores(vectors[i], labels, vectors).items(), key=lambda kv: kv[1])[0] == labels[i]
               for i in range(0, len(labels), 7))
    assert hits >= 0.8 * len(range(0, len(labels), 7))


def test_text_floor_fuses_bm25_and_dense(state, settings, encode):
    query, _ = _query("What did Marley's ghost drag behind him?", state, settings, encode)
    result = _text_rows(query)
    assert result.candidates and result.name == "text"
    both = [c for c in result.candidates if "dense" in c.components and "bm25" in c.components]
    assert both, "BM25 and dense should agree on some passage"
    assert [c.score for c in result.candidates] == sorted((c.score for c in result.candidates), reverse=True)


def test_dense_search_in_memory_matches_lancedb(state, settings, encode):
    query, _ = _query("the ghost of Jacob Marley", state, settings, encode)
    mem = operators.dense_search(query, 10)
    lance_settings = settings.model_copy(update={"retrieve": settings.retrieve.model_copy(update={"dense_search": "lancedb"})})
    lance = operators.dense_search(operators.Query(**{**query.__dict__, "settings": lance_settings}), 10)
    assert list(mem.rows[:5]) == list(lance.rows[:5])
    assert np.allclose(mem.scores[:5], lance.scores[:5], atol=1e-4)


def test_neighbour_finds_passages_the_text_floor_misses(state, settings, encode):
    query, _ = _query(RELATIONAL, state, settings, encode)
    text_rows = {c.row for c in _text_rows(query).candidates}
    result = graph_operators.neighbour(query)
    assert result.candidates
    linked = {l.entity_id for l in query.analysis.links}
    view = state.view("governed")
    provenance = {pid for e in linked for pid in view.entity(e).passage_ids}
    for e in linked:
        for other in view.nx[e]:
            for rid in view.nx[e][other]["info"].relation_ids:
                provenance |= set(view.relation_by_id[rid].passage_ids)
    assert all(state.passages[c.row].passage_id in provenance for c in result.candidates)
    assert {c.row for c in result.candidates} - text_rows, "neighbour adds nothing beyond the text floor"


def _named_pairs(state, n):
    """Pairs of the most mentioned named characters of the repository's own graph."""
    view = state.view("governed")
    named = sorted((e for e in view.graph.entities if e.type == "PERSON" and view.nx.degree(e.entity_id)),
                   key=lambda e: -e.mentions)[:6]
    return [(a.name, b.name) for i, a in enumerate(named) for b in named[i + 1 :]][:n]


def test_path_joins_two_linked_entities_and_reaches_past_the_text_floor(state, settings, encode):
    """For questions about pairs of characters, the path operator describes how they connect
    and cites passages behind each edge, some of which the text floor's top-k does not hold."""
    beyond = 0
    pairs = _named_pairs(state, 8)
    assert len(pairs) >= 3
    for a, b in pairs:
        query, _ = _query(f"How is {a} connected to {b}?", state, settings, encode)
        assert "path" in query.plan.operators
        result = graph_operators.path(query)
        assert result.hints and all(h.kind == "path" and ("—[" in h.text or "]—" in h.text) for h in result.hints)
        assert all(c.paths for c in result.candidates)
        text_rows = {c.row for c in _text_rows(query).candidates}
        beyond += len({c.row for c in result.candidates} - text_rows)
    assert beyond > 0, "the path operator found nothing the text floor had not"


def test_community_operator_for_a_global_question(state, settings, encode):
    query, _ = _query(GLOBAL, state, settings, encode)
    assert query.analysis.need == "global" and "community" in query.plan.operators
    result = graph_operators.community(query)
    assert result.candidates and result.hints
    view = state.view("governed")
    for cand in result.candidates:
        pid = state.passages[cand.row].passage_id
        assert any(pid in view.community_by_id[c].passage_ids for c in cand.communities)


def test_rerank_scores_sentence_windows(state, settings, encode):
    query, linked = _query("What did Scrooge's clerk earn?", state, settings, encode)
    rows = [c.row for c in _text_rows(query).candidates[:5]]
    best = score_windows(state, rows, query.question, linked.question_vec, encode, settings.embed.model)
    assert set(best) == set(rows)
    for row, w in best.items():
        p = state.passages[row]
        assert p.start <= w.start < w.end <= p.end
        assert -1 <= w.score <= 1


def test_retrieve_full_evidence_is_exact_cited_and_in_budget(carol_repo, settings, encode):
    r = retrieve(RELATIONAL, carol_repo, settings, encode=encode)
    assert r.evidence and r.evidence_tokens <= 2000
    text = {}
    for ev in r.evidence:
        source = text.setdefault(ev.doc_id, (Path(carol_repo) / "sources" / f"{ev.doc_id}.txt").read_text(encoding="utf-8"))
        assert source[ev.start : ev.end] == ev.text
        assert ev.operators and "final" in ev.scores
    assert len({e.passage_id for e in r.evidence}) == len(r.evidence)
    assert [e.rank for e in r.evidence] == list(range(1, len(r.evidence) + 1))
    assert {"analyse", "plan", "text", "rerank", "evidence", "total"} <= set(r.timings_ms)
    sig = r.signals
    assert len(sig.hop1_scores) == min(50, len(get_state(carol_repo).passages))
    assert sig.hop1_scores == sorted(sig.hop1_scores, reverse=True) and isinstance(sig.hop1_scores[0], float)
    assert sig.hop2_scores and sig.n_linked >= 1 and sig.need == "relational"


def test_graph_operators_get_their_share_of_the_budget(carol_repo, settings, encode):
    """Evidence found by the graph operators fills at least their share of what was cited."""
    r = retrieve(RELATIONAL, carol_repo, settings, encode=encode)
    for op in ("neighbour", "path"):
        found = sum(ev.n_tokens for ev in r.evidence if op in ev.operators)
        assert found >= min(r.plan.shares[op] * r.plan.budget_tokens, r.evidence_tokens) * 0.5


@pytest.mark.parametrize("budget", [600, 120, 30, 5])
def test_budget_is_respected(carol_repo, settings, encode, budget):
    r = retrieve(RELATIONAL, carol_repo, settings, budget=budget, encode=encode)
    assert r.plan.budget_tokens == budget
    assert 0 < r.evidence_tokens <= budget
    for ev in r.evidence:
        assert (Path(carol_repo) / "sources" / f"{ev.doc_id}.txt").read_text(encoding="utf-8")[ev.start : ev.end] == ev.text


def test_presets_change_the_route(carol_repo, encode):
    runs = {name: retrieve(RELATIONAL, carol_repo, load_settings(pipeline=name, environ={}), encode=encode)
            for name in ("full", "passages-only", "no-floor", "raw-graph", "no-structural-guidance")}
    assert set(runs["passages-only"].plan.operators) == {"text", "rerank"}
    assert all(set(ev.operators) <= {"text", "rerank"} for ev in runs["passages-only"].evidence)
    assert not runs["passages-only"].signals.hop2_scores
    assert "text" not in runs["no-floor"].plan.operators
    assert runs["no-floor"].evidence and all("text" not in ev.operators for ev in runs["no-floor"].evidence)
    assert runs["raw-graph"].plan.graph == "raw"
    assert not runs["no-structural-guidance"].hints and "path" not in runs["no-structural-guidance"].plan.operators
    assert all(not ev.paths for ev in runs["no-structural-guidance"].evidence)
    assert runs["full"].plan.operators != runs["passages-only"].plan.operators


def test_escalation_widens_the_route(carol_repo, settings, encode):
    base = retrieve("What is Martha's occupation?", carol_repo, settings, encode=encode)
    wide = retrieve("What is Martha's occupation?", carol_repo, settings, escalate=True, encode=encode)
    assert wide.plan.budget_tokens == 3000 and len(wide.plan.operators) >= len(base.plan.operators)


def test_bad_questions(carol_repo, settings, encode):
    with pytest.raises(InputError, match="empty"):
        retrieve("   \n ", carol_repo, settings, encode=encode)
    with pytest.raises(InputError, match="limit"):
        retrieve("why " * 25_000, carol_repo, settings, encode=encode)
    with pytest.raises(InputError, match="positive"):
        retrieve("Who is Scrooge?", carol_repo, settings, budget=0, encode=encode)
    other = retrieve("斯克鲁奇的外甥叫什么名字？", carol_repo, settings, encode=encode)
    assert any("Latin" in n for n in other.analysis.notes)
    assert other.evidence_tokens <= 2000 and not other.analysis.links


def test_bad_repositories(carol_repo, settings, encode, tmp_path):
    with pytest.raises(RepositoryError, match="no repository"):
        retrieve("Who is Scrooge?", tmp_path / "nowhere", settings, encode=encode)
    half = tmp_path / "half.rag"
    shutil.copytree(carol_repo, half)
    shutil.rmtree(half / "tables" / "passages.lance")
    with pytest.raises(PageRAGError) as err:
        retrieve("Who is Scrooge?", half, settings, encode=encode)
    assert "\n" not in str(err.value) and "half" in str(err.value)


def test_multi_hop_route_searches_each_sentence(state, settings, encode):
    question = "Scrooge's clerk had a very small fire. What did the ghost of Marley drag behind him?"
    query, linked = _query(question, state, settings, encode, need="multi-hop")
    assert len(linked.parts) == 2
    result = operators.text_floor(query, operators.dense_search(query, 20), operators.lexical_search(query, 20),
                                  list(zip(linked.parts, linked.part_vecs)))
    head = " ".join(state.passages[c.row].text for c in result.candidates[:6])
    assert "clerk's fire" in head and "cash-boxes" in head  # one evidence site per sentence


def test_cross_encoder_rerank_when_configured(state, settings, encode):
    """A configured cross-encoder scores the windows instead of the bi-encoder (here the packaged
    MiniLM directory loaded as a CrossEncoder: a real model, its scores are not cosines)."""
    query, linked = _query("What did Scrooge's clerk earn?", state, settings, encode)
    rows = [c.row for c in _text_rows(query).candidates[:3]]
    bi = {row: w.score for row, w in score_windows(state, rows, query.question, linked.question_vec, encode,
                                                     settings.embed.model).items()}
    cross = score_windows(state, rows, query.question, linked.question_vec, encode, settings.embed.model,
                          cross_encoder="packaged:all-MiniLM-L6-v2")
    assert set(cross) == set(rows)
    for row, w in cross.items():
        p = state.passages[row]
        assert p.start <= w.start < w.end <= p.end and abs(w.score - bi[row]) > 1e-6
        assert w.passage_id == p.passage_id and w.text == state.source_text(p.doc_id)[w.start:w.end]


def test_window_cache_round_trips_through_disk(state, settings, encode):
    from pagerag.retrieve.windows import WindowIndex, window_index

    index = window_index(state, settings.embed.model)
    index.ensure([0, 1, 2], encode)
    index.save()
    again = WindowIndex(state, settings.embed.model)  # a new process would start like this
    for row in (0, 1, 2):
        assert again.windows_of(row) == index.windows_of(row)
        assert np.array_equal(again.vectors[row], index.vectors[row])
    # One loaded matrix shared by all rows (reading the npz per row once held a copy per row: OOM)
    assert again.vectors[0].base is again.vectors[1].base is again.vectors[2].base
