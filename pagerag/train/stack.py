"""The three fitted decisions of the question path, fitted together on a set of training books:
the book RCS model, the sentence ranker, and the sufficiency model stacked on both.

    stack = Stack.fit(examples, books, config)     # examples: Example records (tables below)
    scores = stack.apply(held_out_examples)        # per example and retrieval variant

The sufficiency model's inputs include the RCS and the ranker's probabilities, so it is fitted on
*held-out* values of those (each book's from models fitted without it: stacking), and every
threshold curve comes from held-out scores too (each book scored by a model fitted without it).
`pagerag.train.fit` wraps this in leave-books-out cross-validation (Stack.fit on 14 books,
apply on the 15th) and fits the packaged models on all 15.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..confidence.metrics import accuracy_coverage_curve
from ..confidence.model import RCSModel, l2_for
from ..generate.sentences import SENTENCE_FEATURES
from ..generate.sufficiency import LLM_FEATURE, SUFFICIENCY_FEATURES, aggregate, p_yes_logit
from .features import SENT_LABELS

CURVE_POINTS = 400
INNER_FOLDS = 5  # stacking folds inside a fit: the books split into this many groups
_LEVEL1: dict[tuple, "Level1"] = {}  # level-1 fits by (what they fit, on which books): reused across configs


@dataclass
class Variant:
    """One retrieval of one example, as arrays."""

    rcs: dict[str, float]
    sents: np.ndarray  # (n, len(SENTENCE_FEATURES))
    sent_labels: np.ndarray  # (n, len(SENT_LABELS)) int
    level: dict[str, float]
    labels: dict
    ms: dict


@dataclass
class Example:
    id: str
    book: str
    kind: str
    question_type: str
    answer_type: str
    located: bool
    variants: dict[str, Variant]
    p_yes: float | None = None  # the LLM's P(yes) on the default variant, when measured

    @property
    def typed(self) -> bool:
        return self.answer_type != "other"


def load_examples(rows: Sequence[dict]) -> list[Example]:
    out = []
    for r in rows:
        variants = {}
        for name, v in r["variants"].items():
            sents = np.asarray(v["sents"], dtype=np.float64).reshape(-1, len(SENTENCE_FEATURES))
            labels = np.asarray(v["sent_labels"], dtype=np.int64).reshape(-1, len(SENT_LABELS))
            level = {**v["level"], **v.get("graph", {})}  # as generate.decide passes them to aggregate
            variants[name] = Variant(v["rcs"], sents, labels, level, v["labels"], v.get("ms", {}))
        out.append(Example(r["id"], r["book"], r["kind"], r["question_type"], r["answer_type"], r["located"], variants))
    return out


@dataclass
class Config:
    """What is fitted: feature lists, L2 priors, the ranker's label."""

    rcs_features: list[str]
    sentence_features: list[str] = field(default_factory=lambda: list(SENTENCE_FEATURES))
    sufficiency_features: list[str] = field(default_factory=lambda: list(SUFFICIENCY_FEATURES))
    rcs_prior: float = 3.0
    ranker_prior: float = 3.0
    suff_prior: float = 3.0
    ranker_label: str = "answer|evidence"  # which SENT_LABELS columns make a positive sentence
    suff_label: str = "suff"  # fitted on: suff (every statement or an answer sentence retrieved) | answer_retrieved
    llm: bool = False  # the sufficiency model also reads the LLM's P(yes)


def fit_logistic_model(X: np.ndarray, y: np.ndarray, names: Sequence[str], prior: float) -> RCSModel:
    return RCSModel.fit(X, y, list(names), l2=l2_for(y.size, prior))


def sentence_positive(labels: np.ndarray, which: str) -> np.ndarray:
    cols = [SENT_LABELS.index(c) for c in which.split("|")]
    return labels[:, cols].max(axis=1)


# --------------------------------------------------------------------------------------------
# Level 1: RCS and ranker


def rcs_data(examples: Sequence[Example], names: Sequence[str], variant: str = "default") -> tuple[np.ndarray, np.ndarray]:
    rows = [e for e in examples if e.variants[variant].labels["rcs"] is not None]
    X = np.array([[e.variants[variant].rcs[n] for n in names] for e in rows], dtype=np.float64).reshape(len(rows), len(names))
    y = np.array([e.variants[variant].labels["rcs"] for e in rows], dtype=np.float64)
    return X, y


def ranker_data(examples: Sequence[Example], cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """Sentences of answerable examples (default retrieval) that hold at least one positive."""
    cols = [SENTENCE_FEATURES.index(n) for n in cfg.sentence_features]
    Xs, ys = [], []
    for e in examples:
        v = e.variants["default"]
        if e.kind != "answerable" or not len(v.sents):
            continue
        y = sentence_positive(v.sent_labels, cfg.ranker_label)
        if y.any():
            Xs.append(v.sents[:, cols])
            ys.append(y)
    return np.vstack(Xs), np.concatenate(ys).astype(np.float64)


@dataclass
class Level1:
    rcs: RCSModel
    ranker: RCSModel
    _memo: dict = field(default_factory=dict, repr=False)

    @classmethod
    def fit(cls, examples: Sequence[Example], cfg: Config) -> "Level1":
        key = (tuple(cfg.rcs_features), cfg.rcs_prior, tuple(cfg.sentence_features), cfg.ranker_prior, cfg.ranker_label,
               frozenset(e.book for e in examples), len(examples))
        if key not in _LEVEL1:
            X, y = rcs_data(examples, cfg.rcs_features)
            Xs, ys = ranker_data(examples, cfg)
            _LEVEL1[key] = cls(fit_logistic_model(X, y, cfg.rcs_features, cfg.rcs_prior),
                               fit_logistic_model(Xs, ys, cfg.sentence_features, cfg.ranker_prior))
        return _LEVEL1[key]

    def rcs_score(self, v: Variant) -> float:
        return float(self.rcs.score(v.rcs))

    def ranked(self, v: Variant) -> tuple[np.ndarray, np.ndarray]:
        """(sentence order best first, probabilities in that order)."""
        if not len(v.sents):
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        cols = [SENTENCE_FEATURES.index(n) for n in self.ranker.feature_names]
        probs = self.ranker.score_matrix(v.sents[:, cols])
        order = np.argsort(-probs, kind="stable")
        return order, probs[order]

    def sufficiency_features(self, e: Example, variant: str, llm: bool) -> dict[str, float]:
        key = (e.id, variant)
        if key not in self._memo:
            v = e.variants[variant]
            order, probs = self.ranked(v)
            ranked = [dict(zip(SENTENCE_FEATURES, v.sents[i])) for i in order[:3]]  # aggregate reads the best three
            best = {"dense": float(v.sents[:, SENTENCE_FEATURES.index("dense")].max()) if len(v.sents) else 0.0,
                    "lex": float(v.sents[:, SENTENCE_FEATURES.index("lex")].max()) if len(v.sents) else 0.0}
            feats = aggregate(ranked, probs[:2].tolist(), v.level, self.rcs_score(v), e.typed)
            feats["max_dense"], feats["max_lex"] = best["dense"], best["lex"]
            self._memo[key] = feats
        feats = dict(self._memo[key])
        if llm:
            feats[LLM_FEATURE] = p_yes_logit(e.p_yes if e.p_yes is not None else 0.5)
        return feats


# --------------------------------------------------------------------------------------------
# The stack


def curve_of(scores: np.ndarray, labels: np.ndarray, points: int = CURVE_POINTS) -> list[list[float]]:
    """[threshold, CWAR, coverage] at up to `points` thresholds (score quantiles), best first."""
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order]
    coverage, accuracy = accuracy_coverage_curve(scores, labels)
    picks = np.unique(np.linspace(0, s.size - 1, min(points, s.size)).round().astype(int))
    out = []
    for i in picks:
        # the confident set {score >= s[i]} includes the whole tie group of s[i]
        j = int(np.flatnonzero(s >= s[i])[-1])
        out.append([round(float(s[i]), 6), round(float(1 - y[: j + 1].mean()), 6), round((j + 1) / s.size, 6)])
    return out


@dataclass
class Stack:
    level1: Level1
    suff: RCSModel
    cfg: Config
    held_out: dict = field(default_factory=dict)  # the within-stack held-out scores (for curves)
    _memo: dict = field(default_factory=dict, repr=False)

    @classmethod
    def fit(cls, examples: Sequence[Example], cfg: Config) -> "Stack":
        books = sorted({e.book for e in examples})
        names = list(cfg.sufficiency_features) + ([LLM_FEATURE] if cfg.llm else [])
        stacked: list[tuple[Example, dict[str, float]]] = []
        rcs_held: list[tuple[float, float]] = []
        for fold in inner_folds(books):  # level-1 values of each book from models fitted without it
            inner = Level1.fit([e for e in examples if e.book not in fold], cfg)
            for e in examples:
                if e.book in fold and _usable(e, cfg):
                    stacked.append((e, inner.sufficiency_features(e, "default", cfg.llm)))
                if e.book in fold and e.variants["default"].labels["rcs"] is not None:
                    rcs_held.append((inner.rcs_score(e.variants["default"]), e.variants["default"].labels["rcs"]))
        X = np.array([[f[n] for n in names] for _, f in stacked])
        y = np.array([e.variants["default"].labels["suff"] for e, _ in stacked], dtype=np.float64)
        fit_y = np.array([_fit_label(e, cfg) for e, _ in stacked], dtype=np.float64)  # nan: left out of the fit
        group = np.array([e.book for e, _ in stacked])
        suff_held = np.zeros(y.size)
        for fold in inner_folds(books):  # the sufficiency model's own held-out scores, for its threshold curve
            m = np.isin(group, list(fold))
            train = ~m & ~np.isnan(fit_y)
            if m.any() and train.any():
                suff_held[m] = fit_logistic_model(X[train], fit_y[train], names, cfg.suff_prior).score_matrix(X[m])
        keep = ~np.isnan(fit_y)
        suff = fit_logistic_model(X[keep], fit_y[keep], names, cfg.suff_prior)
        suff.curve = curve_of(suff_held, y)
        level1 = Level1.fit(examples, cfg)
        r = np.array(rcs_held)
        level1.rcs.curve = curve_of(r[:, 0], r[:, 1])
        return cls(level1, suff, cfg, {"suff": (suff_held, y, group), "rcs": (r[:, 0], r[:, 1])})

    def suff_score(self, e: Example, variant: str) -> float:
        key = (e.id, variant)
        if key not in self._memo:
            self._memo[key] = float(self.suff.score(self.level1.sufficiency_features(e, variant, self.cfg.llm)))
        return self._memo[key]


def inner_folds(books: Sequence[str], k: int = INNER_FOLDS) -> list[set[str]]:
    """The books (sorted) dealt round-robin into k groups."""
    ordered = sorted(books)
    return [set(ordered[i::k]) for i in range(min(k, len(ordered)))]


def _fit_label(e: Example, cfg: Config) -> float:
    """The label the sufficiency model is fitted on: `suff`, or with `answer_retrieved` only the
    clearest cases (an answer sentence retrieved vs unanswerable or nothing of the evidence
    retrieved); nan for an example left out of the fit."""
    labels = e.variants["default"].labels
    if cfg.suff_label == "suff" or e.kind != "answerable":
        return float(labels["suff"])
    if labels["answer_retrieved"]:
        return 1.0
    return 0.0 if labels["suff"] == 0 else float("nan")


def _usable(e: Example, cfg: Config) -> bool:
    return e.variants["default"].labels["suff"] is not None and (not cfg.llm or e.p_yes is not None)
