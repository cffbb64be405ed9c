"""RCS features: the paper's phi1-phi9 from retrieval score lists, plus extras the pipeline has.

Everything takes plain arrays so any retriever can call it; all arithmetic is float64 because
the top-50 cosines of a small embedder differ in the 4th decimal, where float32 rounding
would change the entropy and lift features.

Paper features (Bacellar 2026, section 5.1), with K = len(hop1) (50 in the pipeline):
  hop1_max      s1                      hop1_margin  s1 - s2
  hop1_top3     mean(s1..s3)            hop1_entropy normalised Shannon entropy (below)
  hop1_lift     s1 / mean(s1..sK)       hop2_max / hop2_margin / hop2_entropy: same on hop-2
  query_len     word count of the question (whitespace tokens)

Entropy normalisation: scores are clipped at 0 (cosines can be negative), turned into a
distribution p_i = s_i / sum_j s_j over the K scores, and H = -sum p_i ln p_i / ln K, so
H is in [0, 1] (1 = flat list). With fewer than two positive scores H = 0.
"""
from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..text.names import normalise_mention

PAPER_FEATURES = (
    "hop1_max", "hop1_margin", "hop1_top3", "hop1_entropy", "hop1_lift",
    "hop2_max", "hop2_margin", "hop2_entropy", "query_len",
)
HOP1_ONLY_FEATURES = tuple(f for f in PAPER_FEATURES if not f.startswith("hop2_"))


def _sorted_scores(scores: Sequence[float] | np.ndarray | None) -> np.ndarray:
    if scores is None:
        return np.zeros(0, dtype=np.float64)
    arr = np.asarray(scores, dtype=np.float64).ravel()
    arr = arr[np.isfinite(arr)]
    return -np.sort(-arr)


def normalised_entropy(scores: np.ndarray) -> float:
    """Shannon entropy of the sum-normalised (clipped at 0) scores divided by ln K; in [0, 1]."""
    pos = np.clip(np.asarray(scores, dtype=np.float64), 0.0, None)
    total = pos.sum()
    if pos.size < 2 or total <= 0.0:
        return 0.0
    p = pos[pos > 0] / total
    return float(-(p * np.log(p)).sum() / np.log(pos.size))


def score_shape(scores: Sequence[float] | np.ndarray | None, prefix: str, lift: bool = True) -> dict[str, float]:
    """max, margin (s1-s2), top-3 mean, entropy and lift (s1 / mean of all) of one score list.

    An empty list gives zeros (a missing hop is "no evidence", not an error).
    """
    s = _sorted_scores(scores)
    if s.size == 0:
        out = {f"{prefix}_max": 0.0, f"{prefix}_margin": 0.0, f"{prefix}_top3": 0.0, f"{prefix}_entropy": 0.0}
        if lift:
            out[f"{prefix}_lift"] = 0.0
        return out
    mean_all = s.mean()
    out = {
        f"{prefix}_max": float(s[0]),
        f"{prefix}_margin": float(s[0] - s[1]) if s.size > 1 else 0.0,
        f"{prefix}_top3": float(s[:3].mean()),
        f"{prefix}_entropy": normalised_entropy(s),
    }
    if lift:
        out[f"{prefix}_lift"] = float(s[0] / mean_all) if mean_all > 0 else 0.0
    return out


def query_length(question: str) -> float:
    return float(len(question.split()))


def compute_features(
    hop1_scores: Sequence[float] | np.ndarray,
    hop2_scores: Sequence[float] | np.ndarray | None,
    question: str,
    extras: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """phi1-phi9 (see module docstring) plus any `extras` (already computed, passed through).

    hop1_scores: dense cosines of the text-floor top-K (K = 50), any order.
    hop2_scores: per-passage scores of the expansion (graph operators or bridge queries,
    max over queries per passage), any order; None or empty when there is no hop 2.
    """
    hop1 = score_shape(hop1_scores, "hop1")
    hop2 = score_shape(hop2_scores, "hop2", lift=False)
    feats = {name: hop1[name] for name in PAPER_FEATURES if name.startswith("hop1_")}
    feats.update({name: hop2[name] for name in PAPER_FEATURES if name.startswith("hop2_")})
    feats["query_len"] = query_length(question)
    for key, value in (extras or {}).items():
        feats[key] = float(value)
    return feats


# ---------------------------------------------------------------------------------------------
# Extras: the pipeline computes these anyway (BM25 list, entity linking); each one is kept in
# the shipped model only if removing it costs AUC-AC in the leave-one-out ablation.


def rank_agreement(dense_ids: Sequence, lexical_ids: Sequence, k: int) -> float:
    """|dense top-k intersect lexical top-k| / k: do BM25 and dense agree on the evidence?"""
    if k <= 0:
        return 0.0
    return len(set(list(dense_ids)[:k]) & set(list(lexical_ids)[:k])) / float(k)


def lexical_features(bm25_scores: Sequence[float] | np.ndarray, dense_ids: Sequence,
                     bm25_ids: Sequence, k: int) -> dict[str, float]:
    """BM25 score shape (scale-free: margin and top-3 relative to the max) and rank agreement."""
    s = _sorted_scores(bm25_scores)
    top = s[0] if s.size and s[0] > 0 else 0.0
    return {
        "bm25_rel_margin": float((s[0] - s[1]) / top) if s.size > 1 and top else 0.0,
        "bm25_lift": float(top / s.mean()) if top else 0.0,
        "bm25_dense_agree": rank_agreement(dense_ids, bm25_ids, k),
    }


def mention_coverage(mentions: Iterable[str], evidence_texts: Iterable[str]) -> tuple[float, float]:
    """(count, fraction) of question mentions that occur verbatim in the evidence.

    A question whose named things are all in the evidence has at least its first-hop passages;
    a missing one usually means a gold passage is missing.
    """
    names = sorted({normalise_mention(m) for m in mentions if m.strip()})
    if not names:
        return 0.0, 1.0
    evidence = normalise_mention(" \n ".join(evidence_texts))
    found = sum(1 for name in names if name in evidence)
    return float(found), found / len(names)


def evidence_redundancy(evidence_vecs: np.ndarray) -> float:
    """Mean pairwise cosine of the evidence passages (unit vectors). Near 1 = the evidence is
    several views of one thing, which in a multi-hop question means the next hop is missing."""
    V = np.asarray(evidence_vecs, dtype=np.float64)
    k = V.shape[0]
    if k < 2:
        return 1.0
    G = V @ V.T
    return float((G.sum() - np.trace(G)) / (k * (k - 1)))


def content_word_coverage(content_words: Iterable[str], evidence_texts: Iterable[str]) -> float:
    """Share of the question's content words (lower-case, no stop words) found in the evidence:
    every hop of a question names its relation ('seat', 'spouse'), and a hop whose words are
    nowhere in the evidence was probably not retrieved."""
    words = {w.lower() for w in content_words if w.strip()}
    if not words:
        return 1.0
    vocab = set(re.findall(r"\w+", " ".join(evidence_texts).lower()))
    return sum(1 for w in words if w in vocab) / len(words)
