"""The sufficiency decision s(q, E): the probability that the evidence supports an answer, from a
fitted model, and a refusal below the threshold chosen for the target CWAR.

Features (SUFFICIENCY_FEATURES, all from the question and the retrieved evidence, no gold):
  rcs             the book RCS (retrieval confidence, gate.py)
  read_*          the reader (pagerag.read) on the evidence sentences: the best and second-best
                  P(states the answer) as logits, the best sentence's answer-span margin (its
                  span's score minus "no answer here"), the best margin among the three best
                  sentences, and how many sentences state it (sum and count of P > 0.5)
  max_dense, max_lex  the best embedding cosine and lexical cover of any evidence sentence
  names_evidence, attr_span  the share of the question's names the evidence mentions, the best
                  cover of its other words by one evidence span
  graph_*         what the graph added (paths, best path, community match, graph-only share)
With an LLM (generate.judge = pick or yesno) the LLM reads instead (generate.window_judge); this model
decides without one, or with generate.judge = model.
Models are logistic (confidence.model), fitted on the training books by `python -m
pagerag.train.fit` with nested leave-books-out cross-validation; tau comes from the model's
held-out accuracy-coverage curve at `generate.target_cwar`.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

from ..records import GRAPH_OPERATORS, Evidence, Verdict
from ..text.words import stems_of
from .question import QuestionTerms

SUFFICIENCY_FEATURES = ("rcs", "read_top", "read_second", "read_margin", "read_best_margin", "read_mass",
                        "read_count", "max_dense", "max_lex", "names_evidence", "attr_span", "graph_paths", "best_path",
                        "community_match", "graph_only_share")
LLM_FEATURE = "p_yes_logit"

def evidence_level(terms: QuestionTerms, evidence: Sequence[Evidence], idf: Callable[[str], float]) -> dict[str, float]:
    """Signals over the whole evidence: the share of the question's names it mentions anywhere,
    and the best IDF-weighted cover of the question's attribute words by one evidence span."""
    text = " ".join(e.text for e in evidence).lower()
    names = (sum(any(t.lower() in text for t in tokens) for tokens in terms.name_tokens) / len(terms.name_tokens)
             if terms.name_tokens else 1.0)
    attributes = terms.attributes or terms.all_stems
    total = sum(idf(a) for a in attributes)
    best = 0.0
    if total > 0:
        for e in evidence:
            present = stems_of(e.text)
            best = max(best, sum(idf(a) for a in attributes if a in present) / total)
    return {"names_evidence": names, "attr_span": best}


def _logit(p: float) -> float:
    p = min(max(float(p), 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


MARGIN_CLIP = 15.0  # span margins beyond this say nothing more


def aggregate(probs: Sequence[float], margins: Sequence[float], level: Mapping[str, float], rcs: float,
              max_dense: float, max_lex: float) -> dict[str, float]:
    """SUFFICIENCY_FEATURES from the reader's outputs on the read sentences (P and span margin, in
    evidence order), the evidence-level signals (with what the graph added:
    retrieve.api.graph_features), the RCS and the best sentence cosine / lexical cover. No
    sentence read: the reader's features are those of a sentence that states nothing."""
    p = [float(x) for x in probs]
    m = [max(-MARGIN_CLIP, min(MARGIN_CLIP, float(x))) for x in margins]
    order = sorted(range(len(p)), key=lambda i: -p[i])
    top = order[0] if order else None
    return {
        "rcs": float(rcs),
        "read_top": _logit(p[top]) if top is not None else _logit(0.0),
        "read_second": _logit(p[order[1]]) if len(order) > 1 else _logit(0.0),
        "read_margin": m[top] if top is not None else -MARGIN_CLIP,
        "read_best_margin": max((m[i] for i in order[:3]), default=-MARGIN_CLIP),
        "read_mass": math.log1p(sum(p)),
        "read_count": math.log1p(sum(x > 0.5 for x in p)),
        "max_dense": float(max_dense),
        "max_lex": float(max_lex),
        "names_evidence": float(level.get("names_evidence", 0.0)),
        "attr_span": float(level.get("attr_span", 0.0)),
        "graph_paths": math.log1p(float(level.get("n_paths", 0.0))),
        "best_path": float(level.get("best_path", 0.0)),
        "community_match": float(level.get("community_match", 0.0)),
        "graph_only_share": float(level.get("graph_only_share", 0.0)),
    }


def p_yes_logit(p_yes: float) -> float:
    """The logit of P(yes), clipped to [0.005, 0.995] so one certain reply cannot dominate."""
    p = min(max(float(p_yes), 0.005), 0.995)
    return math.log(p / (1 - p))


# The graph features and the operators that observe them. The models were fitted on the `full`
# pipeline; when a pipeline never runs an operator (passages-only, ppr, ...), its features are
# not 0 but unobserved.
FEATURE_OPERATORS = {"graph_paths": ("path",), "best_path": ("path",), "community_match": ("community",),
                     "graph_only_share": GRAPH_OPERATORS}


def unobserved_as_typical(model, features: Mapping[str, float], operators: Sequence[str]) -> dict[str, float]:
    """`features` with each feature whose operators did not run set to the model's training mean,
    so it adds nothing to the logit. Without this a missing community score reads as "the
    nearest community does not match at all" and (negative weight) makes the model sure of
    itself: passages-only refused 0 of 40 unanswerable DEV questions."""
    means = dict(zip(model.feature_names, model.mean))
    out = dict(features)
    for name, observers in FEATURE_OPERATORS.items():
        if name in out and name in means and not set(observers) & set(operators):
            out[name] = float(means[name])
    return out


def decide(model, features: Mapping[str, float], tau: float, method: str, names: Sequence[str]) -> Verdict:
    """The verdict of one fitted sufficiency model: sufficient when P >= tau. `names`: the book's
    entities the question was linked to (all a refusal repeats of the question)."""
    p = float(model.score(features))
    sufficient = p >= tau
    shown = [f"rcs {features['rcs']:.2f}"] if "rcs" in features else []
    if "read_top" in features:
        shown.append(f"reader {1 / (1 + math.exp(-features['read_top'])):.2f}")
    if LLM_FEATURE in features:
        shown.append(f"P(yes) {1 / (1 + math.exp(-features[LLM_FEATURE])):.2f}")
    return Verdict(sufficient, method, "" if sufficient else explain(names, features, p, tau), round(p, 4),
                   f"P(sufficient) {p:.2f} vs tau {tau:.2f} ({', '.join(shown)})")


def explain(names: Sequence[str], features: Mapping[str, float], p: float, tau: float) -> str:
    """One sentence naming the weakest signal, for the refusal message (the decision is `p < tau`)."""
    about = ", ".join(names[:3]) if names else "the question's subject"
    if features.get("read_mass", 0.0) == 0.0 and features.get("max_dense", 0.0) == 0.0:
        return "no evidence was retrieved"
    if names and features.get("names_evidence", 1.0) == 0.0:
        return f"the evidence does not mention {about}"
    reader = 1 / (1 + math.exp(-features.get("read_top", -10.0)))
    if reader < 0.5:
        return f"no evidence sentence about {about} states the answer (the reader's best sentence: {reader:.2f})"
    return f"the evidence about {about} does not support an answer well enough (P(sufficient) {p:.2f} < tau {tau:.2f})"
