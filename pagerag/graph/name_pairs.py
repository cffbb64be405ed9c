"""Similar same-type names for governance's embedding merge, kept from one version to the next.

Whether two names are alike (cosine of their vectors >= the threshold) depends on the two names
alone, so what a version found among its names still holds in the next one: an add compares
only the names it brought (new x all of their type), a build every name with every other. Both
give the same pairs with the same cosines (`exact_cosines`: each pair's cosine is computed
alone, so it does not depend on which other rows were multiplied beside it), which keeps
build(A) + add(B) equal to build(A+B).

`NameMemo` is what a version keeps (`NAME_MEMO` in its directory): the names compared (type,
name), their vectors, and the similar pairs among them, for one model and threshold.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

NAME_MEMO = "govern_names.npz"
SIMILARITY_ROWS = 1024  # rows of a similarity block held at once (a library's PERSON names: ~7k at 22 books)
MARGIN = 1e-4  # float32 products may miss a pair by rounding: candidates are taken this far below, then checked exactly

Key = tuple[str, str]  # (type, name)


@dataclass
class NameMemo:
    keys: list[Key]
    vectors: np.ndarray  # float32, one row per key
    pairs: list[tuple[int, int, float]]  # (i, j, cosine), i < j, same type, cosine >= threshold
    threshold: float
    model: str
    stats: dict[str, int] = field(default_factory=dict)  # what computing it cost (not stored)


def exact_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products in float64, row by row alike whatever else is computed (a matrix
    product's rounding can depend on the shapes around it)."""
    return (a.astype(np.float64) * b.astype(np.float64)).sum(axis=1)


def _checked(vectors: np.ndarray, rows: np.ndarray, cols: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    sims = exact_cosines(vectors[rows], vectors[cols]) if len(rows) else np.zeros(0)
    keep = sims >= threshold
    return [(int(a), int(b), float(s)) for a, b, s in zip(rows[keep], cols[keep], sims[keep])]


def similar_among(vectors: np.ndarray, rows: np.ndarray, threshold: float) -> tuple[list[tuple[int, int, float]], int]:
    """Pairs (a, b), a < b, of indexes into `vectors` with a in `rows` (sorted), whose cosine is
    at least `threshold`; and how many cosines were computed. A pair of two rows is found once."""
    found: list[tuple[int, int, float]] = []
    chosen = np.zeros(len(vectors), bool)
    chosen[rows] = True
    computed = 0
    for start in range(0, len(rows), SIMILARITY_ROWS):
        block_rows = rows[start:start + SIMILARITY_ROWS]
        block = vectors[block_rows] @ vectors.T
        computed += block.size
        r, c = np.nonzero(block >= threshold - MARGIN)
        a, b = block_rows[r], c
        # each unordered pair once: (row, other) with other not a chosen row, or both chosen and a < b
        once = (a != b) & (~chosen[b] | (a < b))
        lo, hi = np.minimum(a[once], b[once]), np.maximum(a[once], b[once])
        found += _checked(vectors, lo, hi, threshold)
    return found, computed


def name_pairs(keys: list[Key], embed: Callable[[list[str]], np.ndarray], threshold: float, model: str,
               known: NameMemo | None = None) -> NameMemo:
    """The similar same-type pairs among `keys` (distinct, sorted); those among names `known`
    already compared are taken from it, only pairs with a new name are computed."""
    if known is not None and (known.threshold != threshold or known.model != model):
        known = None
    old = {k: i for i, k in enumerate(known.keys)} if known is not None else {}
    vectors = _vectors(keys, embed, known, old)
    position = {k: i for i, k in enumerate(keys)}
    pairs: list[tuple[int, int, float]] = []
    if known is not None:  # old x old: unchanged names, unchanged cosines
        back = {old[k]: position[k] for k in keys if k in old}
        pairs += [(back[i], back[j], s) for i, j, s in known.pairs if i in back and j in back]
    by_type: dict[str, list[int]] = defaultdict(list)
    for i, (typ, _) in enumerate(keys):
        by_type[typ].append(i)
    computed = new_names = 0
    for idx in by_type.values():
        idx_arr = np.asarray(idx)
        fresh = np.asarray([n for n, i in enumerate(idx) if keys[i] not in old], dtype=int)
        new_names += len(fresh)
        found, n = similar_among(vectors[idx_arr], fresh, threshold)
        computed += n
        pairs += [(int(idx_arr[a]), int(idx_arr[b]), s) for a, b, s in found]
    memo = NameMemo(keys, vectors, sorted(pairs), threshold, model)
    memo.stats = {"names": len(keys), "names_new": new_names, "cosines_computed": computed,
                  "pairs": len(pairs), "pairs_reused": len(pairs) - _new_pairs(pairs, keys, old)}
    return memo


def _new_pairs(pairs, keys: list[Key], old: dict[Key, int]) -> int:
    return sum(1 for i, j, _ in pairs if keys[i] not in old or keys[j] not in old)


def _vectors(keys: list[Key], embed, known: NameMemo | None, old: dict[Key, int]) -> np.ndarray:
    """The keys' name vectors: the known ones as the base had them (so its pairs still hold), the
    others embedded."""
    out = np.zeros((len(keys), known.vectors.shape[1] if known is not None else 0), np.float32)
    missing = [i for i, k in enumerate(keys) if k not in old]
    fresh = np.asarray(embed([keys[i][1] for i in missing]), dtype=np.float32) if missing else None
    if known is None:
        if fresh is None:
            return np.zeros((0, 1), np.float32)
        return fresh
    for i, k in enumerate(keys):
        if k in old:
            out[i] = known.vectors[old[k]]
    if fresh is not None:
        out[missing] = fresh
    return out


# --------------------------------------------------------------------------------------------
# Kept in the version directory


def save_memo(memo: NameMemo, path: Path) -> None:
    pairs = np.asarray([(i, j) for i, j, _ in memo.pairs], dtype=np.int64).reshape(-1, 2)
    sims = np.asarray([s for _, _, s in memo.pairs], dtype=np.float64)
    with open(path, "wb") as fh:
        np.savez(fh, types=np.asarray([k[0] for k in memo.keys], dtype=str), names=np.asarray([k[1] for k in memo.keys], dtype=str),
                 vectors=memo.vectors, pairs=pairs, sims=sims, threshold=np.float64(memo.threshold), model=np.asarray(memo.model))


def load_memo(path: Path) -> NameMemo | None:
    """The memo a version kept; None when it has none (built before it) or it cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as data:
            keys = list(zip(data["types"].tolist(), data["names"].tolist()))
            pairs = [(int(i), int(j), float(s)) for (i, j), s in zip(data["pairs"].tolist(), data["sims"].tolist())]
            return NameMemo(keys, data["vectors"].astype(np.float32), pairs, float(data["threshold"]), str(data["model"]))
    except (OSError, ValueError, KeyError):
        return None
