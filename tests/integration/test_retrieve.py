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
from pagerag.retrieve.analyse import analyse
from pagerag.retrieve.community import community
from pagerag.retrieve.need import load_need_model
from pagerag.retrieve.ppr import ppr
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
    assert analysis.need in ("relational", "multi-hop") and analysis.decided_by == "classifier"
    assert abs(sum(analysis.need_scores.values()) - 1) < 1e-3
    assert linked.question_vec.shape == (state.vectors.shape[1],)
    assert abs(float(np.linalg.norm(linked.question_vec)) - 1) < 1e-3


def test_need_classifier_tells_a_theme_question_from_a_fact_question(encode):
    model = load_need_model()
    assert model.classes == ("local", "complex", "global") and model.info["fitted_on"]
    theme = "What are the main themes of the book as a whole?"
    fact = "In what year did the family move to the town?"
    p_theme = model.probabilities(theme, encode([theme])[0])
    p_fact = model.probabilities(fact, encode([fact])[0])
    assert p_theme["global"] > p_fact["global"] and p_fact["local"] > p_theme["local"]


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


def test_community_operator_opens_several_communities_for_a_global_question(state, settings, encode):
    query, _ = _query(GLOBAL, state, settings, encode)
    assert "community" in query.plan.operators
    result = community(query)
    assert result.candidates and result.hints
    opened = {c for cand in result.candidates for c in cand.communities}
    assert len(opened) >= 2 and len(result.hints) >= 2, "a global question needs several communities, not one"
    view = state.view("governed")
    parents = {view.community_by_id[c].parent for c in opened}
    assert not opened & parents, "a community and its parent repeat each other"
    for cand in result.candidates:
        pid = state.passages[cand.row].passage_id
        assert any(pid in view.community_by_id[c].passage_ids for c in cand.communities)
        assert 0 <= cand.components["centrality"] <= 1
    member = result.vectors["community_member"]
    assert member.shape == (len(state.passages),) and all(member[c.row] > 0 for c in result.candidates)


def test_hidden_passages_leave_no_trace_in_community_summaries(state, settings, encode):
    query, _ = _query(GLOBAL, state, settings, encode)
    hints = community(query).hints
    view = state.view("governed")
    quoted = {}
    for c in view.graph.communities:
        for p in c.passage_ids:
            text = " ".join(state.passage(p).text.split())
            for hint in hints:
                for sentence in hint.text.split(". "):
                    if len(sentence) > 40 and sentence[:60] in text:
                        quoted.setdefault(sentence[:60], set()).add(p)
    assert quoted, "the summaries quote their passages"
    hidden = {p for ps in quoted.values() for p in ps}
    masked_query = operators.Query(**{**query.__dict__, "exclude": frozenset(state.passage_index[p] for p in hidden)})
    masked = community(masked_query)
    shown = " ".join(h.text for h in masked.hints)
    assert not any(probe in shown for probe in quoted)
    assert not {state.passages[c.row].passage_id for c in masked.candidates} & hidden


def test_ppr_seeds_at_linked_entities_and_names_its_provenance(state, settings, encode):
    query, _ = _query(RELATIONAL, state, settings, encode)
    dense = operators.dense_search(query, 50)
    result = ppr(query, dense)
    assert result.candidates and result.vectors["ppr"].max() == 1.0
    linked = {l.name for l in query.analysis.links}
    assert any(set(c.entities) & linked for c in result.candidates[:5])
    scores = [c.score for c in result.candidates[: query.plan.top_k]]
    assert scores == sorted(scores, reverse=True)
    hidden = frozenset(c.row for c in result.candidates[:3])
    masked = ppr(operators.Query(**{**query.__dict__, "exclude": hidden}), dense)
    assert not {c.row for c in masked.candidates} & hidden
    assert all(masked.vectors["ppr"][r] == 0 for r in hidden)


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
    assert {"analyse", "plan", "text", "ppr", "rerank", "rank", "evidence", "total"} <= set(r.timings_ms)
    assert [e.scores["final"] for e in r.evidence] == sorted((e.scores["final"] for e in r.evidence), reverse=True)
    assert {"n_paths", "best_path", "community_match", "graph_only_share", "ppr_evidence_share"} <= set(r.graph_features)
    sig = r.signals
    assert len(sig.hop1_scores) == min(50, len(get_state(carol_repo).passages))
    assert sig.hop1_scores == sorted(sig.hop1_scores, reverse=True) and isinstance(sig.hop1_scores[0], float)
    assert sig.hop2_scores and sig.n_linked >= 1 and sig.need == "relational"


def test_a_graph_candidate_enters_only_by_outranking_the_floors_marginal_passage(state, settings, encode):
    """With room for two passages: the floor's top passage is always kept; the second place goes
    to the graph candidate only when it scores above the floor's next passage."""
    from pagerag.retrieve.api import gather
    from pagerag.retrieve.evidence import select
    from pagerag.retrieve.ranker import order

    query, linked = _query(RELATIONAL, state, settings, encode)
    items = gather(query, linked).items
    top = next(it for it in items if it.operators.get("text", {}).get("rank") == 1)
    second = next(it for it in items if it.operators.get("text", {}).get("rank") == 2)
    graph_only = next(it for it in items if "text" not in it.operators)
    tokens = [int(state.passages[it.row].n_tokens) for it in (top, second, graph_only)]
    room_for_two = plan(query.analysis, settings, budget_tokens=tokens[0] + max(tokens[1:]) + 10)
    room_for_one = plan(query.analysis, settings, budget_tokens=tokens[0] + 10)
    for graph_score, winner in ((0.2, second), (0.8, graph_only)):
        scores = np.array([1.0 if it is top else 0.5 if it is second else graph_score if it is graph_only else -5.0
                           for it in items])
        ranked = order(items, scores)
        chosen = [e.passage_id for e in select(ranked, room_for_two, state)]
        assert chosen == [state.passages[top.row].passage_id, state.passages[winner.row].passage_id]
        assert [e.passage_id for e in select(ranked, room_for_one, state)] == [state.passages[top.row].passage_id]
    scores = np.array([3.0 if it is graph_only else 1.0 if it is top else -5.0 for it in items])  # even above it
    kept = [e.passage_id for e in select(order(items, scores), room_for_one, state)]
    assert state.passages[top.row].passage_id in kept


def test_with_the_fitted_ranker_the_floors_top_is_always_in_the_evidence(state, settings, encode):
    from pagerag.retrieve.api import gather, rank_pool
    from pagerag.retrieve.evidence import select

    for question in (RELATIONAL, GLOBAL, "What did Marley's ghost drag behind him?", "Who is Bob Cratchit?"):
        query, linked = _query(question, state, settings, encode)
        ranked = rank_pool(gather(query, linked), query, linked)
        top = next(it for it in ranked if it.operators.get("text", {}).get("rank") == 1)
        for budget in (60, 250, 600):
            evidence = select(ranked, plan(query.analysis, settings, budget_tokens=budget), state)
            assert state.passages[top.row].passage_id in {e.passage_id for e in evidence}
            assert sum(e.n_tokens for e in evidence) <= budget


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
    alone = retrieve(RELATIONAL, carol_repo, load_settings(pipeline="ppr", environ={}), encode=encode)
    assert alone.evidence and all(ev.operators == ["ppr"] for ev in alone.evidence)


def test_escalation_widens_the_budget(carol_repo, settings, encode):
    base = retrieve("What is Martha's occupation?", carol_repo, settings, encode=encode)
    wide = retrieve("What is Martha's occupation?", carol_repo, settings, escalate=True, encode=encode)
    assert wide.plan.budget_tokens == 3000 and wide.plan.operators == base.plan.operators
    assert wide.evidence_tokens >= base.evidence_tokens


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


@pytest.fixture(scope="session")
def printer_state(printer_repo):
    return get_state(printer_repo)


def test_multi_hop_route_searches_each_sentence(printer_state, settings, encode):
    """Two sentences about two far-apart places of the training-book excerpt (printer_repo):
    the gold Mr. Moore brought from the capitol (char ~3,400) and the settlers Other Day led to
    safety (char ~63,000)."""
    question = "Mr. Moore brought a bag of gold down from the capitol. Who piloted sixty-two settlers to safety?"
    query, linked = _query(question, printer_state, settings, encode, need="multi-hop")
    assert len(linked.parts) == 2
    result = operators.text_floor(query, operators.dense_search(query, 20), operators.lexical_search(query, 20),
                                  list(zip(linked.parts, linked.part_vecs)))
    head = " ".join(printer_state.passages[c.row].text for c in result.candidates[:6])
    assert "$4,000" in head and "sixty-two men" in head  # one evidence site per sentence


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
