"""Similar same-type names for governance's embedding merge, kept from one version to the next.

Whether two names are alike (cosine of their vectors >= the threshold) depends on the two names
alone, so what a version found among its names still holds in the next one: an add compares
only the names it brought (new x all of their type), a build every name with every other. Both
give the same pairs with the same cosines (`exact_cosines`: each pair's cosine is computed
alone, so it does not depend on which other rows were multiplied beside it), which keeps
build(A) + add(B) equal to build(A+B).

`NameMemo` is what a version keeps (`NAME_MEMO` in its directory): the names compared (type,
name) and the similar pairs among them with their cosines, for one model and threshold; their
vectors are those of the version's entity tables (the memo carries only the few, usually none,
the tables lack: 8.7 MB of a 57 MB 7-book library otherwise).
"""
from __future__ import annotations

import time
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
    vectors: np.ndarray | None  # float32, one row per key (None when read back: see `carried`)
    pairs: list[tuple[int, int, float]]  # (i, j, cosine), i < j, same type, cosine >= threshold
    threshold: float
    model: str
    stats: dict[str, int] = field(default_factory=dict)  # what computing it cost (not stored)
    carried: dict[str, np.ndarray] = field(default_factory=dict)  # read back: vectors of names the entity tables lack


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
    t0 = time.perf_counter()
    vectors = _vectors(keys, embed, known)
    t1 = time.perf_counter()
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
    # the seconds separate embedding the names the base lacked (the add's) from comparing them
    memo.stats = {"names": len(keys), "names_new": new_names, "cosines_computed": computed,
                  "pairs": len(pairs), "pairs_reused": len(pairs) - _new_pairs(pairs, keys, old),
                  "embed_seconds": round(t1 - t0, 3), "compare_seconds": round(time.perf_counter() - t1, 3)}
    return memo


def _new_pairs(pairs, keys: list[Key], old: dict[Key, int]) -> int:
    return sum(1 for i, j, _ in pairs if keys[i] not in old or keys[j] not in old)


def _vectors(keys: list[Key], embed, known: NameMemo | None) -> np.ndarray:
    """The keys' name vectors. A name the base compared has the vector it had there (its pairs
    hold only for that vector): from the memo, or from `embed`, which a library seeds with the
    base's entity tables, where the same process stored the same vectors (save_memo keeps only
    the others)."""
    have = dict(known.carried) if known is not None else {}
    if known is not None and known.vectors is not None:
        have.update(zip((n for _, n in known.keys), known.vectors))
    missing = sorted({n for _, n in keys if n not in have})
    if missing:
        have.update(zip(missing, np.asarray(embed(missing), dtype=np.float32)))
    if not keys:
        return np.zeros((0, 1), np.float32)
    return np.stack([have[n] for _, n in keys]).astype(np.float32, copy=False)


# --------------------------------------------------------------------------------------------
# Kept in the version directory


def save_memo(memo: NameMemo, path: Path, stored: set[str] = frozenset()) -> None:
    """The keys, pairs and cosines; vectors only of names not in `stored` (the version's entity
    tables, which hold the same vectors: a library's cluster names are all there in practice)."""
    pairs = np.asarray([(i, j) for i, j, _ in memo.pairs], dtype=np.int64).reshape(-1, 2)
    sims = np.asarray([s for _, _, s in memo.pairs], dtype=np.float64)
    extra = [i for i, (_, n) in enumerate(memo.keys) if n not in stored]
    dim = memo.vectors.shape[1] if memo.vectors is not None else 1
    with open(path, "wb") as fh:
        np.savez(fh, keys=np.frombuffer("\n".join(f"{t}\t{n}" for t, n in memo.keys).encode("utf-8"), dtype=np.uint8),
                 extra=np.asarray(extra, dtype=np.int64),
                 extra_vectors=memo.vectors[extra] if extra else np.zeros((0, dim), np.float32),
                 pairs=pairs, sims=sims, threshold=np.float64(memo.threshold), model=np.asarray(memo.model))


def load_memo(path: Path) -> NameMemo | None:
    """The memo a version kept; None when it has none (built before it) or it cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as data:
            text = data["keys"].tobytes().decode("utf-8")
            keys = [tuple(line.split("\t", 1)) for line in text.split("\n")] if text else []
            pairs = [(int(i), int(j), float(s)) for (i, j), s in zip(data["pairs"].tolist(), data["sims"].tolist())]
            carried = {keys[i][1]: v for i, v in zip(data["extra"].tolist(), data["extra_vectors"].astype(np.float32))}
            return NameMemo(keys, None, pairs, float(data["threshold"]), str(data["model"]), carried=carried)
    except (OSError, ValueError, KeyError):
        return None
