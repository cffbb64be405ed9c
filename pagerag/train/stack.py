"""The two fitted decisions of the question path, fitted together on a set of training books: the
book RCS model (the gate) and the sufficiency model over the reader's scores, the RCS and the
retrieval features.

    stack = Stack.fit(examples, cfg)       # examples: Example records (feature tables + reader scores)
    scores = stack.apply(held_out)         # (rcs, P(sufficient)) per example and retrieval variant
    stack.held_out                         # the same for its own examples, each from models fitted
                                           # without the example's fold of books

The sufficiency model reads the RCS, so it is fitted on held-out RCS values (each book's from an
RCS model fitted without its fold: stacking); its threshold curve comes from held-out sufficiency
scores the same way. The reader's scores in the tables are held out already (each training book
read by a reader trained without its fold: pagerag.train.reader_scores). Models are scikit-learn
logistic regressions (confidence.model.fit_logistic), stored as RCSModel files. The folds are the
books dealt round-robin into INNER_FOLDS groups.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..confidence.model import RCSModel, curve_of, l2_for
from ..generate.sentences import CHOOSER_FEATURES, SENTENCE_FEATURES, chooser_rows
from ..generate.sufficiency import LLM_FEATURE, SUFFICIENCY_FEATURES, aggregate, p_yes_logit
from .features import SENT_LABELS

INNER_FOLDS = 5
USED_SENTENCE_FEATURES = ("dense", "lex")  # what the sufficiency model reads of the sentence features
KIND_GROUPS = {"answerable": "answerable", "written": "written"}  # every other kind: "synthetic"
WRITTEN_TYPES = ("fact", "relational", "multi-hop", "global", "unanswerable")  # qa/train's question types


@dataclass
class Variant:
    """One retrieval of one example, as arrays: the table's features and labels, and the reader's
    outputs on the sentences it reads (the first READ_LIMIT of the evidence)."""

    rcs: dict[str, float]
    sents: np.ndarray  # (n, the table's sentence features)
    sent_labels: np.ndarray  # (n, len(SENT_LABELS)) int
    level: dict[str, float]
    labels: dict
    reads: dict[str, np.ndarray]  # p, margin, span_strict, span_lenient (one per read sentence)


@dataclass(eq=False)
class Example:
    id: str
    book: str
    kind: str
    question_type: str
    located: bool
    variants: dict[str, Variant]
    p_yes: float | None = None  # an LLM's P(yes) on the default variant, when measured

    @property
    def answerable(self) -> bool:
        return self.kind == "answerable"

    @property
    def question_set(self) -> str:
        """"written" (qa/train) or "graphrag" (GraphRAG-Bench and the negatives made from it)."""
        return "written" if self.question_type in WRITTEN_TYPES else "graphrag"

    @property
    def kind_group(self) -> str:
        return KIND_GROUPS.get(self.kind, "synthetic")


def load_examples(rows: Sequence[dict], reads: dict[str, dict]) -> list[Example]:
    """Examples from feature-table rows (features.read_tables: SENTENCE_FEATURES columns) and reader
    scores (pagerag.train.reader_scores); a row with no reader scores is left out. The sentence
    arrays keep only the features used here."""
    columns = SENTENCE_FEATURES
    keep = [list(columns).index(n) for n in USED_SENTENCE_FEATURES]
    out = []
    for r in rows:
        if r["id"] not in reads:
            continue
        variants = {}
        for name, v in r["variants"].items():
            sents = np.asarray(v["sents"], dtype=np.float64).reshape(-1, len(columns))[:, keep]
            labels = np.asarray(v["sent_labels"], dtype=np.int64).reshape(-1, len(SENT_LABELS))
            level = {**v["level"], **v.get("graph", {})}  # as generate.decide passes them to aggregate
            rd = {k: np.asarray(x, dtype=np.float64) for k, x in reads[r["id"]][name].items() if k != "span"}
            variants[name] = Variant(v["rcs"], sents, labels, level, v["labels"], rd)
        out.append(Example(r["id"], r["book"], r["kind"], r["question_type"], r["located"], variants))
    return out


@dataclass
class Config:
    """What is fitted: feature lists, L2 priors, how example kinds are weighted."""

    rcs_features: list[str]
    sufficiency_features: list[str] = field(default_factory=lambda: list(SUFFICIENCY_FEATURES))
    rcs_prior: float = 3.0
    suff_prior: float = 3.0
    # "none": every example weighs 1; "kinds": answerable, written and synthetic negatives each
    # weigh a third of the fit (the written ones are few but the realistic kind)
    weighting: str = "none"
    llm: bool = False  # the sufficiency model also reads an LLM's P(yes)


def sufficiency_features(v: Variant, rcs: float) -> dict[str, float]:
    """The sufficiency model's inputs for one variant (generate.sufficiency.aggregate, as `ask`)."""
    col = USED_SENTENCE_FEATURES.index
    return aggregate(v.reads["p"], v.reads["margin"], v.level, rcs,
                     float(v.sents[:, col("dense")].max()) if len(v.sents) else 0.0,
                     float(v.sents[:, col("lex")].max()) if len(v.sents) else 0.0)


def weights_of(examples: Sequence[Example], how: str) -> np.ndarray:
    if how == "none":
        return np.ones(len(examples))
    groups = [e.kind_group for e in examples]
    count = {g: groups.count(g) for g in set(groups)}
    return np.array([len(examples) / (len(count) * count[g]) for g in groups])


def inner_folds(books: Sequence[str], k: int = INNER_FOLDS) -> list[set[str]]:
    """The books (sorted) dealt round-robin into k groups."""
    ordered = sorted(books)
    return [set(ordered[i::k]) for i in range(min(k, len(ordered)))]


Scores = dict[tuple[str, str], tuple[float, float]]  # (example id, variant) -> (rcs, P(sufficient))


@dataclass
class Stack:
    rcs: RCSModel
    suff: RCSModel
    cfg: Config
    held_out: Scores = field(default_factory=dict)
    chooser: dict = field(default_factory=dict)  # which read sentence an extractive answer quotes

    @classmethod
    def fit(cls, examples: Sequence[Example], cfg: Config) -> "Stack":
        folds = inner_folds(sorted({e.book for e in examples}))
        rcs_model, rcs_oof = _fit_rcs(examples, cfg, folds)
        keys = [(e, v) for e in examples for v in e.variants]
        suff_names = list(cfg.sufficiency_features) + ([LLM_FEATURE] if cfg.llm else [])
        X_all = np.array([_suff_row(e, v, rcs_oof[(e.id, v)], cfg, suff_names) for e, v in keys])
        fit_rows = [i for i, (e, v) in enumerate(keys) if v == "default" and _usable(e, cfg)]
        fit_examples = [keys[i][0] for i in fit_rows]
        y = np.array([e.variants["default"].labels["suff"] for e in fit_examples], dtype=np.float64)
        w = weights_of(fit_examples, cfg.weighting)
        books_all = np.array([e.book for e, _ in keys])
        suff_oof = _held_out(X_all[fit_rows], y, w, np.array([e.book for e in fit_examples]), X_all, books_all,
                             suff_names, cfg.suff_prior, folds)
        suff = RCSModel.fit(X_all[fit_rows], y, suff_names, l2=l2_for(y.size, cfg.suff_prior), sample_weight=w)
        suff.curve = curve_of(suff_oof[fit_rows], y)
        held = {(e.id, v): (rcs_oof[(e.id, v)], float(suff_oof[i])) for i, (e, v) in enumerate(keys)}
        return cls(rcs_model, suff, cfg, held, fit_chooser(examples))

    def apply(self, examples: Sequence[Example]) -> Scores:
        out: Scores = {}
        names = self.suff.feature_names
        for e in examples:
            for v, var in e.variants.items():
                rcs = float(self.rcs.score(var.rcs))
                out[(e.id, v)] = (rcs, float(self.suff.score_matrix(np.array([_suff_row(e, v, rcs, self.cfg, names)]))[0]))
        return out


def _fit_rcs(examples: Sequence[Example], cfg: Config, folds: list[set[str]]) -> tuple[RCSModel, dict]:
    """The RCS model on every labelled default retrieval, and held-out RCS of every variant."""
    names = cfg.rcs_features
    labelled = [e for e in examples if e.variants["default"].labels["rcs"] is not None]
    X = np.array([[e.variants["default"].rcs[n] for n in names] for e in labelled])
    y = np.array([e.variants["default"].labels["rcs"] for e in labelled], dtype=np.float64)
    keys = [(e, v) for e in examples for v in e.variants]
    X_all = np.array([[e.variants[v].rcs[n] for n in names] for e, v in keys])
    books = np.array([e.book for e in labelled])
    oof = _held_out(X, y, np.ones(y.size), books, X_all, np.array([e.book for e, _ in keys]), names, cfg.rcs_prior, folds)
    model = RCSModel.fit(X, y, names, l2=l2_for(y.size, cfg.rcs_prior))
    # the labelled default retrievals, in `labelled`'s order (ids are not unique across kinds)
    model.curve = curve_of(oof[[i for i, (e, v) in enumerate(keys)
                                if v == "default" and e.variants["default"].labels["rcs"] is not None]], y)
    return model, {(e.id, v): float(oof[i]) for i, (e, v) in enumerate(keys)}


def _held_out(X: np.ndarray, y: np.ndarray, w: np.ndarray, groups: np.ndarray, X_all: np.ndarray,
              groups_all: np.ndarray, names: Sequence[str], prior: float, folds: list[set[str]]) -> np.ndarray:
    """Every row of X_all scored by a model fitted (on X, y) without the row's fold of books."""
    out = np.full(len(X_all), np.nan)
    for fold in folds:
        train = ~np.isin(groups, list(fold))
        rows = np.isin(groups_all, list(fold))
        if rows.any() and train.any() and len(set(y[train])) == 2:
            model = RCSModel.fit(X[train], y[train], list(names), l2=l2_for(int(train.sum()), prior), sample_weight=w[train])
            out[rows] = model.score_matrix(X_all[rows])
    return out


def _suff_row(e: Example, variant: str, rcs: float, cfg: Config, names: Sequence[str]) -> list[float]:
    feats = sufficiency_features(e.variants[variant], rcs)
    if cfg.llm:
        feats[LLM_FEATURE] = p_yes_logit(e.p_yes if e.p_yes is not None else 0.5)
    return [feats[n] for n in names]


def _usable(e: Example, cfg: Config) -> bool:
    return e.variants["default"].labels["suff"] is not None and (not cfg.llm or e.p_yes is not None)


LENIENT_EXT = SENT_LABELS.index("lenient_ext")


def chooser_data(examples: Sequence[Example]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every read sentence of the answerable examples' default retrieval: the chooser's rows, whether
    quoting it is leniently right, and its book."""
    X, y, groups = [], [], []
    for e in examples:
        v = e.variants["default"]
        n = min(v.reads["p"].size, v.sent_labels.shape[0])
        if not e.answerable or n == 0:
            continue
        X.append(chooser_rows(v.reads["p"][:n], v.sents[:n, USED_SENTENCE_FEATURES.index("lex")],
                              v.sents[:n, USED_SENTENCE_FEATURES.index("dense")]))
        y.append(v.sent_labels[:n, LENIENT_EXT])
        groups += [e.book] * n
    if not X:
        return np.zeros((0, len(CHOOSER_FEATURES))), np.zeros(0), np.array(groups)
    return np.vstack(X), np.concatenate(y).astype(np.int64), np.array(groups)


def fit_chooser(examples: Sequence[Example]) -> dict:
    """A logistic model (scikit-learn) of "quoting this read sentence answers the question",
    over the reader's P, the lexical cover and the cosine: the extractive answer quotes the
    sentence it rates best. Empty (the reader's P alone) when there is nothing to fit."""
    from sklearn.linear_model import LogisticRegression

    X, y, _ = chooser_data(examples)
    if len(set(y.tolist())) < 2:
        return {}
    model = LogisticRegression(C=1.0, max_iter=1000).fit(X, y)
    return {"features": list(CHOOSER_FEATURES), "coef": [round(float(c), 6) for c in model.coef_[0]],
            "intercept": round(float(model.intercept_[0]), 6)}
