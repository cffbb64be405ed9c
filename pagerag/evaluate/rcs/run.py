"""`pagerag rcs-eval`: the paper's Tables 1-4 (+ transfer) for one multi-hop data set.

Protocol: passage-level corpus (one entry = one passage, exact numpy cosine search), dense
top-k (k = 5) evidence, label 1 when every gold passage is in it; tune/test split 50/50 by the
parity of md5(qid); every learned method is fitted on the tune half and everything reported is
measured on the test half, with 95% percentile-bootstrap CIs (2,000 resamples, shared between
methods so differences are paired).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ...confidence import metrics as M
from ...confidence.features import PAPER_FEATURES
from ...confidence.model import DEFAULT_PRIOR, RCSModel, l2_for
from ...errors import PageRAGError
from . import baselines as B

# Extras kept by the leave-one-out elimination on the tune halves (benchmarks/rcs.py --select
# reprints the trace); the paper's phi1-phi9 always stay.
RCS_EXTRAS = (
    "q_clauses", "q_comparison", "mention_cov", "mention_hits", "linked_share", "bridge_margin",
    "bridge_head_hit", "evidence_redundancy", "qword_cov",
)
RCS_FEATURES = PAPER_FEATURES + RCS_EXTRAS
COVERAGES = (0.7, 0.5)
_PREPARED: dict[tuple, dict] = {}


def tune_mask(qids: Sequence[str]) -> np.ndarray:
    """True for the tune half: md5(qid) is even."""
    return np.array([int(hashlib.md5(q.encode("utf-8")).hexdigest(), 16) % 2 == 0 for q in qids])


def prepare_dataset(queries_path: Path, corpus_path: Path, top_k: int = 5, limit: int | None = None,
                    model: str = "packaged:all-MiniLM-L6-v2", progress: Callable[[str], None] | None = None) -> dict:
    """Features, labels and split of one data set; computed once per process (the benchmark
    evaluates each set in-domain and as a transfer source)."""
    from .corpus import embed_corpus, load_corpus, load_queries
    from .tables import build_feature_table

    key = (str(Path(queries_path).resolve()), str(Path(corpus_path).resolve()), top_k, limit, model)
    if key not in _PREPARED:
        say = progress or (lambda _m: None)
        queries = load_queries(Path(queries_path), limit)
        corpus = load_corpus(Path(corpus_path))
        say(f"embedding {len(corpus.pids)} passages (cached by corpus sha256)")
        vecs = embed_corpus(corpus, model)
        data = build_feature_table(queries, corpus, vecs, top_k=top_k, model=model, progress=say)
        data["tune"] = tune_mask(data["qids"])
        data["name"] = Path(queries_path).name.split(".")[0]
        data["n_passages"] = len(corpus.pids)
        _PREPARED[key] = data
    return _PREPARED[key]


def _rows(table: dict, mask: np.ndarray) -> dict:
    return {k: v[mask] for k, v in table.items()}


def _matrix(table: dict, names: Sequence[str]) -> np.ndarray:
    return np.column_stack([table[n] for n in names])


def fit_rcs(table: dict, y: np.ndarray, names: Sequence[str], l2: float | None = None,
            target_cwar: float = 0.2) -> RCSModel:
    """Logistic RCS on the given rows (L2 = DEFAULT_PRIOR / n unless given); tau for the target."""
    l2 = l2_for(y.size, DEFAULT_PRIOR) if l2 is None else l2
    model = RCSModel.fit(_matrix(table, names), y, names, l2=l2, target_cwar=target_cwar)
    model.tau = M.select_threshold(model.score_matrix(_matrix(table, names)), y, target_cwar)
    model.training["l2"] = l2
    return model


def method_scores(data: dict, names: Sequence[str], target_cwar: float, seed: int = 0) -> tuple[dict, dict, RCSModel]:
    """Test-half scores of every method, test-half probabilities of the calibrated ones, and
    the in-domain RCS model."""
    tune, test = _rows(data["table"], data["tune"]), _rows(data["table"], ~data["tune"])
    y_tune = data["labels"][data["tune"]]
    scores = {name: fn(test) for name, fn in B.UNSUPERVISED.items()}
    temp, best_t = B.temperature_scores(data["hop1_lists"][data["tune"]], y_tune, data["hop1_lists"][~data["tune"]])
    scores["temp-scaled"] = temp
    scores["mlp-paper"] = B.mlp_scores(tune, y_tune, test, PAPER_FEATURES, seed)
    scores["mlp"] = B.mlp_scores(tune, y_tune, test, names, seed)
    paper = fit_rcs(tune, y_tune, PAPER_FEATURES, target_cwar=target_cwar)
    scores["rcs-paper"] = paper.score_matrix(_matrix(test, PAPER_FEATURES))
    rcs = fit_rcs(tune, y_tune, names, target_cwar=target_cwar)
    rcs.training.update({"temperature_baseline_T": best_t})
    scores["rcs"] = rcs.score_matrix(_matrix(test, names))
    probs = {k: scores[k] for k in ("rcs", "rcs-paper", "mlp", "mlp-paper")}
    y_test = data["labels"][~data["tune"]]
    # one MLP is one draw of its random initialisation: record how much the seed moves it
    rcs.metrics["mlp_auc_ac_by_seed"] = [M.auc_ac(scores["mlp"], y_test)] + [
        M.auc_ac(B.mlp_scores(tune, y_tune, test, names, s), y_test) for s in range(seed + 1, seed + 5)]
    return scores, probs, rcs


def auc_table(scores: dict, y: np.ndarray, n_boot: int, seed: int) -> dict:
    """Table 1: AUC-AC with CI, normalised gain, and RCS minus each method (paired CI)."""
    idx = M.bootstrap_indices(y.size, n_boot, seed)
    random_auc, oracle = float(y.mean()), M.oracle_auc_ac(y)
    out = {}
    for name, s in {**scores, "oracle": y}.items():
        auc = M.auc_ac(s, y)
        row = {"auc_ac": auc, "ci": list(M.bootstrap_ci(M.auc_ac, s, y, idx)),
               "gain": M.normalised_gain(auc, random_auc, oracle)}
        if name not in ("rcs", "oracle"):
            row["rcs_minus"] = M.paired_bootstrap_diff(M.auc_ac, scores["rcs"], s, y, idx)
        out[name] = row
    return out


def operating_points(scores: dict, y: np.ndarray) -> dict:
    """Table 2: accuracy, CWAR and accuracy gain over answering everything at 70% / 50%."""
    base = float(y.mean())
    return {name: {f"{int(c * 100)}%": {"accuracy": M.accuracy_at_coverage(s, y, c),
                                         "cwar": M.cwar_at_coverage(s, y, c),
                                         "delta_accuracy": M.accuracy_at_coverage(s, y, c) - base}
                   for c in COVERAGES} for name, s in scores.items()}


def calibration_noise_floor(probs: np.ndarray, n_sim: int = 500, seed: int = 0) -> float:
    """Mean ECE of a *perfectly calibrated* predictor with these probabilities on this many
    queries: the ECE that sampling noise alone produces (labels drawn from the probabilities)."""
    rng = np.random.default_rng(seed)
    return float(np.mean([M.ece(probs, rng.random(probs.size) < probs) for _ in range(n_sim)]))


def ablation(data: dict, names: Sequence[str], l2: float) -> dict:
    """Table 4: test AUC-AC change when one feature is left out (refitted on tune, same L2)."""
    tune, test = _rows(data["table"], data["tune"]), _rows(data["table"], ~data["tune"])
    y_tune, y_test = data["labels"][data["tune"]], data["labels"][~data["tune"]]

    def auc_without(drop: str | None) -> float:
        kept = [n for n in names if n != drop]
        model = RCSModel.fit(_matrix(tune, kept), y_tune, kept, l2=l2)
        return M.auc_ac(model.score_matrix(_matrix(test, kept)), y_test)

    full = auc_without(None)
    return {"full": full, "delta": {n: auc_without(n) - full for n in names}}


def transfer(source: dict, target: dict, names: Sequence[str], in_domain_auc: float,
             target_cwar: float, n_boot: int, seed: int) -> dict:
    """RCS fitted on the source's tune half, evaluated on the target's test half."""
    model = fit_rcs(_rows(source["table"], source["tune"]), source["labels"][source["tune"]], names,
                    target_cwar=target_cwar)
    test = _rows(target["table"], ~target["tune"])
    y = target["labels"][~target["tune"]]
    s = model.score_matrix(_matrix(test, names))
    auc = M.auc_ac(s, y)
    cwar, cov = M.cwar_at_threshold(s, y, model.tau)
    return {"train": source["name"], "auc_ac": auc,
            "ci": list(M.bootstrap_ci(M.auc_ac, s, y, M.bootstrap_indices(y.size, n_boot, seed))),
            "in_domain_auc_ac": in_domain_auc, "delta": auc - in_domain_auc, "ece": M.ece(s, y),
            "threshold": {"tau": model.tau, "test_cwar": cwar, "test_coverage": cov}}


def run_rcs_eval(queries_path: Path, corpus_path: Path, train_queries: Path | None = None,
                 train_corpus: Path | None = None, top_k: int = 5, target_cwar: float = 0.2,
                 n_boot: int = 2000, features: Sequence[str] | None = None, limit: int | None = None,
                 seed: int = 0, model: str = "packaged:all-MiniLM-L6-v2",
                 progress: Callable[[str], None] | None = None) -> dict:
    """All tables for one data set (see module docstring); JSON-serialisable."""
    names = list(features or RCS_FEATURES)
    data = prepare_dataset(queries_path, corpus_path, top_k, limit, model, progress)
    y_test = data["labels"][~data["tune"]]
    if y_test.min() == y_test.max() or data["labels"][data["tune"]].min() == data["labels"][data["tune"]].max():
        raise PageRAGError("each half needs both retrieval successes and failures; use more queries")
    scores, probs, rcs = method_scores(data, names, target_cwar, seed)
    methods = auc_table(scores, y_test, n_boot, seed)
    tau_cwar, tau_cov = M.cwar_at_threshold(scores["rcs"], y_test, rcs.tau)
    result = {
        "dataset": {"name": data["name"], "queries": int(data["labels"].size), "passages": data["n_passages"],
                    "tune": int(data["tune"].sum()), "test": int(y_test.size), "top_k": top_k,
                    "success_rate_test": float(y_test.mean())},
        "base_cwar": float(1 - y_test.mean()),
        "features": names,
        "methods": methods,
        "operating_points": operating_points(scores, y_test),
        "threshold": {"target_cwar": target_cwar, "tau": rcs.tau, "test_cwar": tau_cwar, "test_coverage": tau_cov},
        "mlp_auc_ac_by_seed": rcs.metrics.pop("mlp_auc_ac_by_seed"),
        "ece": {k: M.ece(p, y_test) for k, p in probs.items()},
        "ece_noise_floor": calibration_noise_floor(probs["rcs"], seed=seed),
        "brier": {**{k: M.brier(p, y_test) for k, p in probs.items()},
                  "constant": M.constant_brier(y_test, float(data["labels"][data["tune"]].mean()))},
        "ablation": ablation(data, names, rcs.training["l2"]),
        "transfer": None,
        "model": rcs.to_dict(),
        "curves": {k: [c.tolist() for c in M.accuracy_coverage_curve(s, y_test)]
                   for k, s in {**scores, "oracle": y_test}.items()},
    }
    if train_queries and train_corpus:
        source = prepare_dataset(train_queries, train_corpus, top_k, None, model, progress)
        result["transfer"] = transfer(source, data, names, methods["rcs"]["auc_ac"], target_cwar, n_boot, seed)
    return result


def fit_default_model(datasets: Sequence[dict], names: Sequence[str] = RCS_FEATURES, target_cwar: float = 0.2,
                      model_name: str = "packaged:all-MiniLM-L6-v2") -> RCSModel:
    """The packaged model: RCS fitted on the pooled *tune* halves of the given data sets (their
    test halves stay unseen, so the benchmark can still measure it), tau for the target CWAR."""
    tables = [_rows(d["table"], d["tune"]) for d in datasets]
    y = np.concatenate([d["labels"][d["tune"]] for d in datasets])
    pooled = {n: np.concatenate([t[n] for t in tables]) for n in names}
    model = fit_rcs(pooled, y, names, target_cwar=target_cwar)
    scores = model.score_matrix(_matrix(pooled, names))
    model.training.update({
        "data": {d["name"]: {"tune_queries": int(d["tune"].sum()), "success_rate": float(d["labels"][d["tune"]].mean())}
                 for d in datasets},
        "protocol": "multi-hop passage-level corpora, dense top-5 exact cosine, label = every gold passage in the "
                    "top-5; tune half = md5(qid) even; hop 2 = spaCy bridge-entity queries (eval_features)",
        "embedder": model_name, "n": int(y.size), "success_rate": float(y.mean()),
        "prior": DEFAULT_PRIOR,
    })
    cwar, cov = M.cwar_at_threshold(scores, y, model.tau)
    model.metrics = {"tune_auc_ac": M.auc_ac(scores, y), "tune_ece": M.ece(scores, y),
                     "tune_cwar_at_tau": cwar, "tune_coverage_at_tau": cov}
    return model


def evaluate_model_on_test(model: RCSModel, data: dict, n_boot: int = 2000, seed: int = 0) -> dict:
    """A fixed model (e.g. the packaged default) on a data set's test half."""
    test = _rows(data["table"], ~data["tune"])
    y = data["labels"][~data["tune"]]
    s = model.score_matrix(_matrix(test, model.feature_names))
    auc = M.auc_ac(s, y)
    cwar, cov = M.cwar_at_threshold(s, y, model.tau)
    return {"auc_ac": auc, "ci": list(M.bootstrap_ci(M.auc_ac, s, y, M.bootstrap_indices(y.size, n_boot, seed))),
            "gain": M.normalised_gain(auc, float(y.mean()), M.oracle_auc_ac(y)), "ece": M.ece(s, y),
            "brier": M.brier(s, y), "tau_test_cwar": cwar, "tau_test_coverage": cov}
