"""O_r: rerank the fused pool finer than passage level.

A passage's rerank score is its best sentence window's score (windows.py): the best cosine of
the window with the question vectors under the embedding model, or a
`sentence_transformers.CrossEncoder` score when `retrieve.rerank_model` names a local
cross-encoder directory. The best window also tells the budget cut which part of a passage to
keep when the whole passage does not fit. Every candidate is scored, whatever was asked before:
retrieval is a function of (repository, settings, question).
"""
from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np

from ..records import Window
from .state import RepoState
from .windows import Encode, WindowIndex, window_index

def score_windows(state: RepoState, rows: list[int], question: str, qvec: np.ndarray, encode: Encode,
                  model: str, cross_encoder: str = "") -> dict[int, Window]:
    """Each row's best window, its `score` set: every row is scored (its windows embedded now if
    no earlier question did), so the result does not depend on what was asked before. `qvec` may
    hold several vectors (rows): a window's score is its best cosine with any of them."""
    index = window_index(state, model)
    uncached = [r for r in rows if r not in index.vectors]
    if uncached:
        index.ensure(uncached, encode)
        if index.persist:
            index.save()  # the next process (a CLI call) starts with these windows
    scorable = index.covered(rows)
    if cross_encoder:
        return _cross_scores(index, scorable, question, cross_encoder)
    out: dict[int, Window] = {}
    qmat = np.atleast_2d(qvec)  # several query vectors (a multi-hop question's parts): best of them
    for row in scorable:
        windows = index.windows_of(row)
        sims = (index.vectors[row] @ qmat.T).max(axis=1)
        best = int(np.argmax(sims))
        out[row] = replace(windows[best], score=float(sims[best]))
    return out


@functools.lru_cache(maxsize=2)
def _cross_encoder(path: str):
    from ..index.embedding_model import resolve_model_path
    from ..offline import forbid_hub_downloads

    forbid_hub_downloads()
    from sentence_transformers import CrossEncoder

    return CrossEncoder(str(resolve_model_path(path)), device="cpu")


def _cross_scores(index: WindowIndex, rows: list[int], question: str, model_path: str) -> dict[int, Window]:
    pairs, owners = [], []
    for row in rows:
        for w in index.windows_of(row):
            pairs.append((question, w.text))
            owners.append((row, w))
    if not pairs:
        return {}
    scores = np.asarray(_cross_encoder(model_path).predict(pairs, show_progress_bar=False), dtype=np.float64).ravel()
    best: dict[int, Window] = {}
    for (row, w), score in zip(owners, scores):
        if row not in best or score > best[row].score:
            best[row] = replace(w, score=float(score))
    return best
