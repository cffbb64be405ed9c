"""retrieve(question, repo, settings) -> Retrieval: analyse -> plan -> operators -> one pool ->
rerank windows -> ranker -> evidence, with per-stage timings and the raw scores the RCS gate needs.

    from pagerag.retrieve import retrieve
    from pagerag.settings import load_settings
    r = retrieve("How is Fred related to Scrooge?", "carol.rag", load_settings(pipeline="full"))
    for ev in r.evidence: print(ev.passage_id, ev.start, ev.end, ev.operators)

The repository state (passages, vectors, networkx graph, name index) and the embedding model are
loaded once per process, so every question after the first pays only for its own work.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import InputError
from ..settings import Settings
from . import graph_operators, operators
from .analyse import analyse, validate_question
from .community import community
from .evidence import select
from .plan import plan as make_plan
from .plan import strong_links, widen
from .pool import PoolItem, QuestionSignals, build_pool, features
from .ppr import ppr
from .ranker import RankerModel, operator_order, order, ranker_for
from ..records import GRAPH_OPERATORS, Retrieval, Signals, StageCost
from .rerank import score_windows
from .state import RepoState, get_state

Encode = Callable[[list[str]], np.ndarray]


def get_encoder(settings: Settings) -> Encode:
    """The text encoder for query-time work: the one `embed.backend` / `embed.precision` pick
    (pagerag.index.encoder). With the ONNX backend a cold process never imports torch."""
    from ..index.encoder import encode_function

    return encode_function(settings.embed)


def retrieve(question: str, repo: str | Path | RepoState, settings: Settings, budget: int | None = None,
             escalate: bool = False, encode: Encode | None = None, llm=None,
             exclude: set[str] | None = None, docs: list[str] | None = None) -> Retrieval:
    """Evidence for `question` from the repository at `repo` under `settings` (a pipeline preset).

    `budget` overrides retrieve.budget_tokens; `escalate` uses the widened route (all allowed
    operators, 1.5x budget) that the answer stage tries once when the RCS gate is unsure; `llm`
    is the caller's LLM, used only by the LLM router (`retrieve.router = llm`). `exclude` names
    passages to hide: no operator ever returns them (the training corpus asks questions of a
    repository whose evidence passages are masked this way). `docs` limits the question to
    some documents of a library: the passages of every other document are hidden the same way.
    """
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0):
        raise InputError(f"the evidence budget must be a positive number of tokens, got {budget}")
    validate_question(question, settings.retrieve.max_question_chars)  # before any model is loaded
    with single_threaded_blas():
        return _retrieve(question, repo, settings, budget, escalate, encode, llm, exclude, docs)


@functools.lru_cache(maxsize=1)
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def single_threaded_blas():
    """Query-time matrices are small: a multi-threaded BLAS spends more on waking and spinning its
    threads than on the products (5x slower per question on a busy 2-core machine, measured)."""
    return _blas_controller().limit(limits=1, user_api="blas")


def _retrieve(question: str, repo, settings: Settings, budget: int | None, escalate: bool,
              encode: Encode | None, llm, exclude: set[str] | None, docs: list[str] | None = None) -> Retrieval:
    timings: dict[str, float] = {}
    clock = _Clock(timings)
    state = repo if isinstance(repo, RepoState) else get_state(repo)
    hidden = excluded_rows(state, exclude) | outside_documents(state, docs)
    clock.lap("load")
    encode = encode or get_encoder(settings)
    clock.lap("model")
    llm_cost = StageCost()
    analysis, linked = analyse(question, state, settings, encode, llm, llm_cost)
    clock.lap("analyse")
    plan = make_plan(analysis, settings, budget)
    if escalate:
        plan = widen(plan, settings, analysis)
    clock.lap("plan")
    query = operators.Query(analysis.question, linked.question_vec, analysis, state, plan, settings, encode, hidden)
    gathered = gather(query, linked, clock)
    ranked = rank_pool(gathered, query, linked, clock)
    evidence = select(ranked, plan, state, settings.chunk.encoding)
    clock.lap("evidence")
    results = gathered.results
    hints = [h for r in results for h in r.hints] if plan.structural_guidance else []
    if llm is not None and hints and settings.retrieve.global_search == "auto" and analysis.need == "global":
        hints += _global_points(analysis, hints, llm, llm_cost, settings)
        clock.lap("global")
    signals = _signals(query, gathered.dense, gathered.lexical, results, linked)
    clock.lap("signals")
    timings["total"] = round(sum(v for k, v in timings.items() if k not in ("load", "model")), 3)
    return Retrieval(question=analysis.question, analysis=analysis, plan=plan, evidence=evidence, hints=hints,
                     signals=signals, timings_ms=timings, pool_size=len(ranked), llm_cost=llm_cost,
                     graph_features=graph_features(results, evidence, state.passage_index))


@dataclass
class Gathered:
    """What the operators proposed for one question: their results, the pool, and the text
    floor's own hits (the ranker's features read them)."""

    results: list[operators.OperatorResult]
    items: list[PoolItem]
    dense: operators.DenseHits
    lexical: tuple[np.ndarray, np.ndarray]


def gather(query: operators.Query, linked, clock: "_Clock | None" = None) -> Gathered:
    """Run every operator of the plan and pool their candidates (rerank windows not yet scored)."""
    cfg, plan = query.settings.retrieve, query.plan
    dense = operators.dense_search(query, max(cfg.hop1_k, plan.top_k))
    lexical = operators.lexical_search(query, max(cfg.hop1_k, plan.top_k))
    lap = clock.lap if clock is not None else (lambda name: None)
    results = []
    # A question of several sentences ("X did Y. What did Z…?") has one evidence site per
    # sentence: the text floor also searches each one.
    parts = list(zip(linked.parts, linked.part_vecs)) if linked.parts else []
    if "text" in plan.operators:
        results.append(operators.text_floor(query, dense, lexical, parts))
        lap("text")
    for name in plan.operators:
        if name == "ppr":
            results.append(ppr(query, dense))
        elif name == "community":
            results.append(community(query))
        elif name in GRAPH_OPERATORS:
            results.append(getattr(graph_operators, name)(query))
        else:
            continue
        lap(name)
    return Gathered(results, build_pool(results), dense, lexical)


def rank_pool(gathered: Gathered, query: operators.Query, linked, clock: "_Clock | None" = None,
              model: RankerModel | None = None) -> list[PoolItem]:
    """Score the pool's best sentence windows (rerank), then order it by the ranker (or by the
    operators' own scores with `retrieve.ranker = operator`)."""
    plan = query.plan
    if "rerank" in plan.operators:
        rerank_windows(gathered, query, linked)
        if clock is not None:
            clock.lap("rerank")
    if query.settings.retrieve.ranker == "operator":
        ranked = operator_order(gathered.items, [op for op in plan.operators if op != "rerank"])
    else:
        model = model or ranker_for(any(op in GRAPH_OPERATORS for op in plan.operators),
                                    query.settings.retrieve.ranker_model)
        x = features(gathered.items, question_signals(gathered, query), model.features)
        ranked = order(gathered.items, model.score(x))
    if clock is not None:
        clock.lap("rank")
    return ranked


def rerank_windows(gathered: Gathered, query: operators.Query, linked) -> None:
    """Give each pool item its best sentence window (scored against the question and, for a
    question of several sentences, each of them)."""
    items = gathered.items
    if not items:
        return
    qvecs = np.vstack([linked.question_vec, *(list(linked.part_vecs) if linked.parts else [])])
    windows = score_windows(query.state, [it.row for it in items], query.question, qvecs, query.encode,
                            query.settings.embed.model, query.settings.retrieve.rerank_model)
    for it in items:
        it.window = windows.get(it.row)


def _global_points(analysis, hints: list, llm, cost: StageCost, settings: Settings) -> list:
    """Key points of the map-reduce over the opened communities' summaries (global_search.py)."""
    from .global_search import global_search

    cfg = settings.retrieve
    points, notes = global_search(analysis.question, [h for h in hints if h.kind == "community"], llm, cost,
                                  map_tokens=cfg.global_map_tokens, map_calls=cfg.global_map_calls,
                                  points_tokens=cfg.global_points_tokens, encoding=settings.chunk.encoding)
    analysis.notes.extend(notes)
    return points


def question_signals(gathered: Gathered, query: operators.Query) -> QuestionSignals:
    state = query.state
    full = {name: vec for r in gathered.results for name, vec in r.vectors.items()}
    return QuestionSignals(query.vector, state.vectors, state.token_counts, gathered.dense, gathered.lexical[0],
                           gathered.lexical[1], query.analysis.need_scores, full, linked_rows(query))


def linked_rows(query: operators.Query) -> list[tuple[float, frozenset[int]]]:
    """Per strongly linked entity: (link score, the passage rows that mention it)."""
    if query.plan.graph == "none":
        return []
    view = query.state.view(query.plan.graph)
    index = query.state.passage_index
    out = []
    for link in strong_links(query.analysis):
        if link.entity_id in view.entity_row:
            rows = frozenset(index[p] for p in view.entity(link.entity_id).passage_ids if p in index)
            out.append((link.score, rows))
    return out


def graph_features(results: list[operators.OperatorResult], evidence: list, index: dict[str, int]) -> dict[str, float]:
    """What the graph added to this retrieval, as numbers (for the sufficiency decision): how
    many paths it found and the best one's score, how well the nearest community matches, how
    much of the evidence only a graph operator proposed, and the evidence's share of PPR mass."""
    paths = [h for r in results for h in r.hints if h.kind == "path"]
    communities = [h for r in results for h in r.hints if h.kind == "community"]
    graph_only = [e for e in evidence if "text" not in e.operators and any(o in GRAPH_OPERATORS for o in e.operators)]
    total = sum(e.n_tokens for e in evidence) or 1
    ppr_scores = next((r.vectors["ppr"] for r in results if "ppr" in r.vectors), None)
    out = {
        "n_paths": float(len(paths)),
        "best_path": max((h.score for h in paths), default=0.0),
        "community_match": max((h.score for h in communities), default=0.0),
        "n_graph_only": float(len(graph_only)),
        "graph_only_share": round(sum(e.n_tokens for e in graph_only) / total, 4),
    }
    if ppr_scores is not None and ppr_scores.sum() > 0:
        rows = [index[e.passage_id] for e in evidence if e.passage_id in index]
        out["ppr_evidence_share"] = round(float(ppr_scores[rows].sum() / ppr_scores.sum()), 4) if rows else 0.0
    return out


def excluded_rows(state: RepoState, exclude: set[str] | None) -> frozenset[int]:
    """The repository rows of the passage ids to hide; an unknown id is an input error."""
    if not exclude:
        return frozenset()
    unknown = sorted(p for p in exclude if p not in state.passage_index)
    if unknown:
        raise InputError(f"{state.path}: no passage {unknown[0]!r} to exclude ({len(unknown)} unknown passage id(s))")
    return frozenset(state.passage_index[p] for p in exclude)


def outside_documents(state: RepoState, docs: list[str] | None) -> frozenset[int]:
    """The rows of every passage not in the documents `docs` (none: nothing is hidden); an
    unknown document id is an input error. Computed once per repository version and set."""
    if not docs:
        return frozenset()
    wanted = frozenset(docs)

    def rows() -> frozenset[int]:
        known = {p.doc_id for p in state.passages}
        unknown = sorted(wanted - known)
        if unknown:
            raise InputError(f"{state.path}: no document {unknown[0]!r} in this library "
                             f"(its documents: {', '.join(sorted(known)[:8])}{' …' if len(known) > 8 else ''})")
        return frozenset(i for i, p in enumerate(state.passages) if p.doc_id not in wanted)

    return state.memo(("outside", wanted), rows)


class _Clock:
    def __init__(self, timings: dict[str, float]):
        self.timings = timings
        self.t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = round(self.timings.get(name, 0.0) + (now - self.t) * 1000, 3)
        self.t = now


def _signals(query: operators.Query, dense: operators.DenseHits, lexical, results, linked) -> Signals:
    """hop-1: dense cosines of the top hop1_k; hop-2: per graph-found passage, its best cosine
    with the bridge queries (embedded with the question); BM25 scores; link and path facts."""
    cfg = query.settings.retrieve
    passages = query.state.passages
    graph_rows = sorted({c.row for r in results if r.name in GRAPH_OPERATORS for c in r.candidates})
    hop2_scores: list[float] = []
    hop2_ids: list[str] = []
    if graph_rows and linked.bridge_vecs is not None and len(linked.bridge_vecs):
        best = (query.state.vectors[np.asarray(graph_rows)] @ linked.bridge_vecs.T).max(axis=1).astype(np.float64)
        order = np.argsort(-best, kind="stable")[: cfg.hop1_k]
        hop2_scores = [float(best[i]) for i in order]
        hop2_ids = [passages[graph_rows[i]].passage_id for i in order]
    bm25_rows, bm25_scores = lexical
    k = cfg.hop1_k
    return Signals(
        hop1_scores=[float(s) for s in dense.scores[:k]], hop1_ids=[passages[int(r)].passage_id for r in dense.rows[:k]],
        hop2_scores=hop2_scores, hop2_ids=hop2_ids,
        bm25_scores=[float(s) for s in bm25_scores[:k]], bm25_ids=[passages[int(r)].passage_id for r in bm25_rows[:k]],
        n_linked=len(query.analysis.links),
        path_found=any(h.kind == "path" for r in results for h in r.hints),
        need=query.analysis.need, mentions=list(query.analysis.mentions),
    )
