"""Candidate pools with features and labels, for fitting the ranker (train/ranker.py).

For every answerable example of the book corpus the question goes through the real retrieval
path of the `full` pipeline up to the pool (analysis, every operator, the rerank windows), and
each candidate gets its feature row (retrieve/pool.py) and its label: 1 when its passage is one
of the located evidence passages of the example. The `text` variant is the same question's text
floor alone (what `passages-only` pools), with its features computed over that smaller pool.

The need probabilities a question's features use are out-of-fold: predicted by a need model
fitted without the question's own book, so the ranker is not fitted on over-confident needs.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..evaluate.scoring import content_words, located
from ..retrieve.need import need_of
from ..retrieve.pool import FEATURES, TEXT_FEATURES, features


@dataclass
class QuestionPool:
    """One question's candidates (both variants), labels and what recall is measured against."""

    qid: str
    book: str
    qtype: str
    graph_x: np.ndarray
    graph_rows: np.ndarray
    text_x: np.ndarray
    text_rows: np.ndarray
    tokens: dict[int, int]  # row -> passage tokens
    gold: set[int]  # located evidence passages (labels)
    passing: list[set[int]] = field(default_factory=list)  # per statement: rows that locate it
    text_rank1: int = -1  # the text floor's top passage

    def labels(self, rows: np.ndarray) -> np.ndarray:
        return np.array([int(r) in self.gold for r in rows.tolist()], np.int64)


def out_of_fold_needs(data_dir: Path, encode) -> dict[str, dict[str, float]]:
    """GraphRAG-Bench question id -> need probabilities from a model fitted on the other books
    (scikit-learn LeaveOneGroupOut, the packaged model's C and inputs)."""
    from ..retrieve.need import CLASSES, load_need_model
    from .logistic import leave_one_book_out
    from .need import design, need_pipeline, training_questions

    chosen = load_need_model().info.get("chosen", {"C": 0.3, "use_cues": True})
    rows = training_questions(data_dir)
    vectors = np.asarray(encode([r["question"] for r in rows]), np.float64)
    x = design(rows, vectors, chosen["use_cues"])
    y = np.array([r["label"] for r in rows])
    books = np.array([r["book"] for r in rows])
    p = leave_one_book_out(need_pipeline(chosen["C"]), x, y, books, method="predict_proba")
    order = [sorted(set(y.tolist())).index(c) for c in CLASSES]  # predict_proba's columns: sorted labels
    return {r["id"]: {c: round(float(v), 4) for c, v in zip(CLASSES, probs[order])} for r, probs in zip(rows, p)}


def book_pools(state, examples, settings, encode, needs: dict[str, dict[str, float]]) -> list[QuestionPool]:
    """The pools of one book's answerable examples (see the module docstring)."""
    from ..retrieve import operators
    from ..retrieve.analyse import analyse
    from ..retrieve.api import gather, question_signals, rerank_windows
    from ..retrieve.plan import plan as make_plan

    words = [content_words(p.text) for p in state.passages]
    out = []
    for ex in examples:
        analysis, linked = analyse(ex.question, state, settings, encode)
        if ex.source_id in needs:
            analysis.need_scores = needs[ex.source_id]
            analysis.need, analysis.reason = need_of(ex.question, analysis.need_scores)
        query = operators.Query(analysis.question, linked.question_vec, analysis, state,
                                make_plan(analysis, settings), settings, encode)
        gathered = gather(query, linked)
        rerank_windows(gathered, query, linked)
        signals = question_signals(gathered, query)
        items = gathered.items
        text_items = [it for it in items if "text" in it.operators]
        # the text variant's window ranks are over its own pool: recompute on the subset
        graph_x = features(items, signals, FEATURES)
        text_x = features(text_items, signals, TEXT_FEATURES)
        gold = {state.passage_index[p] for p in ex.gold_passage_ids if p in state.passage_index}
        passing = [{r for r in range(len(words)) if located(content_words(s), words[r])} for s in ex.evidence]
        top = [it.row for it in text_items if it.operators["text"]["rank"] == 1]
        out.append(QuestionPool(
            ex.id, ex.book, ex.question_type, graph_x, np.array([it.row for it in items], np.int64),
            text_x, np.array([it.row for it in text_items], np.int64),
            {it.row: int(state.passages[it.row].n_tokens) for it in items}, gold, passing, top[0] if top else -1))
    return out


def build_pools(corpus_file: Path, repos: Path, data_dir: Path, books: list[str], cache: Path,
                rebuild: bool = False, log=print) -> list[QuestionPool]:
    """Pools of every answerable, located training example of `books`, one cache file per book
    in `cache` (a book's pools are rebuilt when missing or with `rebuild`). A book's sentence
    windows are embedded first when they are not yet (the rerank features need them all)."""
    from ..retrieve.api import get_encoder, single_threaded_blas
    from ..retrieve.state import get_state
    from ..retrieve.windows import build_window_index
    from ..settings import load_settings
    from .corpus import read_corpus

    settings = load_settings(pipeline="full", environ={})
    encode = get_encoder(settings)
    todo = [b for b in books if rebuild or not (cache / f"{b}.pkl").is_file()]
    if todo:
        needs = out_of_fold_needs(data_dir, encode)
        examples = [ex for ex in read_corpus(corpus_file)
                    if ex.book in todo and ex.kind == "answerable" and ex.gold_passage_ids]
    for book in todo:
        mine = [ex for ex in examples if ex.book == book]
        state = get_state(repos / f"{book}.rag")
        build_window_index(state, settings.embed.model, encode)
        with single_threaded_blas():
            pools = book_pools(state, mine, settings, encode, needs)
        save_pools(pools, cache / f"{book}.pkl")
        log(f"{book}: {len(mine)} questions, {sum(len(p.graph_rows) for p in pools)} candidates")
    return [p for b in books for p in load_pools(cache / f"{b}.pkl")]


def save_pools(pools: list[QuestionPool], path: Path) -> None:
    import pickle

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump({"features": FEATURES, "text_features": TEXT_FEATURES, "pools": pools}, fh)


def load_pools(path: Path) -> list[QuestionPool]:
    import pickle

    with open(path, "rb") as fh:
        data = pickle.load(fh)
    if tuple(data["features"]) != FEATURES or tuple(data["text_features"]) != TEXT_FEATURES:
        print(f"{path}: pools were built with other features; rebuild them", file=sys.stderr)
        raise SystemExit(2)
    return data["pools"]
