"""retrieve(question, repo, settings) -> Retrieval: analyse -> plan -> operators -> fuse ->
rerank -> evidence, with per-stage timings and the raw scores the RCS gate needs.

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
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import InputError
from ..settings import Settings
from . import graph_operators, operators
from .analyse import analyse, validate_question
from .evidence import select
from .fusion import apply_rerank, fuse
from .plan import plan as make_plan
from .plan import widen
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
             exclude: set[str] | None = None) -> Retrieval:
    """Evidence for `question` from the repository at `repo` under `settings` (a pipeline preset).

    `budget` overrides retrieve.budget_tokens; `escalate` uses the widened route (all allowed
    operators, 1.5x budget) that the answer stage tries once when the RCS gate is unsure; `llm`
    is the caller's LLM, used only by the LLM router (`retrieve.router = llm`). `exclude` names
    passages to hide: no operator ever returns them (the training corpus asks questions of a
    repository whose evidence passages are masked this way).
    """
    if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0):
        raise InputError(f"the evidence budget must be a positive number of tokens, got {budget}")
    validate_question(question, settings.retrieve.max_question_chars)  # before any model is loaded
    with single_threaded_blas():
        return _retrieve(question, repo, settings, budget, escalate, encode, llm, exclude)


@functools.lru_cache(maxsize=1)
def _blas_controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def single_threaded_blas():
    """Query-time matrices are small: a multi-threaded BLAS spends more on waking and spinning its
    threads than on the products (5x slower per question on a busy 2-core machine, measured)."""
    return _blas_controller().limit(limits=1, user_api="blas")


def _retrieve(question: str, repo, settings: Settings, budget: int | None, escalate: bool,
              encode: Encode | None, llm, exclude: set[str] | None) -> Retrieval:
    timings: dict[str, float] = {}
    clock = _Clock(timings)
    state = repo if isinstance(repo, RepoState) else get_state(repo)
    hidden = excluded_rows(state, exclude)
    clock.lap("load")
    encode = encode or get_encoder(settings)
    clock.lap("model")
    llm_cost = StageCost()
    analysis, linked = analyse(question, state, settings, encode, llm, llm_cost)
    qvec = linked.question_vec
    clock.lap("analyse")
    plan = make_plan(analysis, settings, budget)
    if escalate:
        plan = widen(plan, settings, analysis)
    clock.lap("plan")
    query = operators.Query(analysis.question, qvec, analysis, state, plan, settings, encode, hidden)
    cfg = settings.retrieve
    dense = operators.dense_search(query, max(cfg.hop1_k, plan.top_k))
    lexical = operators.lexical_search(query, max(cfg.hop1_k, plan.top_k))
    results = []
    parts = list(zip(linked.parts, linked.part_vecs)) if plan.need == "multi-hop" and linked.parts else []
    if "text" in plan.shares:
        results.append(operators.text_floor(query, dense, lexical, parts))
    clock.lap("text")
    for name in plan.operators:
        if name in GRAPH_OPERATORS:
            results.append(getattr(graph_operators, name)(query))
            clock.lap(name)
    items = fuse(results, plan, cfg.rrf_k)
    clock.lap("fuse")
    if "rerank" in plan.operators and items:
        head = [it.row for it in items[: cfg.rerank_pool]]
        qvecs = np.vstack([qvec, *[v for _, v in parts]])
        scores = score_windows(state, head, analysis.question, qvecs, encode, settings.embed.model, cfg.rerank_model)
        items = apply_rerank(items, scores, cfg.rrf_k)
        clock.lap("rerank")
    evidence = select(items, plan, state, settings.chunk.encoding)
    clock.lap("evidence")
    hints = [h for r in results for h in r.hints] if plan.structural_guidance else []
    signals = _signals(query, dense, lexical, results, linked)
    clock.lap("signals")
    timings["total"] = round(sum(v for k, v in timings.items() if k not in ("load", "model")), 3)
    return Retrieval(question=analysis.question, analysis=analysis, plan=plan, evidence=evidence, hints=hints,
                     signals=signals, timings_ms=timings, pool_size=len(items), llm_cost=llm_cost)


def excluded_rows(state: RepoState, exclude: set[str] | None) -> frozenset[int]:
    """The repository rows of the passage ids to hide; an unknown id is an input error."""
    if not exclude:
        return frozenset()
    unknown = sorted(p for p in exclude if p not in state.passage_index)
    if unknown:
        raise InputError(f"{state.path}: no passage {unknown[0]!r} to exclude ({len(unknown)} unknown passage id(s))")
    return frozenset(state.passage_index[p] for p in exclude)


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
