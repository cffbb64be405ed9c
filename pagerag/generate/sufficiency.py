"""The sufficiency decision s(q, E): the probability that the evidence supports an answer, from a
fitted model, and a refusal below the threshold chosen for the target CWAR.

Features (SUFFICIENCY_FEATURES, all from the question and the retrieved evidence, no gold):
  rcs             the book RCS (retrieval confidence, gate.py)
  top_prob ...    the sentence ranker's best and second-best probabilities, and the best
                  sentence's own features: question words (lex, attr), names, embedding cosine,
                  a candidate of the asked answer type in it or in the best three
  max_* / *_evidence  the same signals over all the evidence: the best cosine and lexical cover,
                  the share of the question's names the evidence mentions anywhere, the best
                  attribute cover of one evidence span (the signals of the old hand-written rule)
  typed           the question asks for a typed value (question.py)
With an LLM whose backend gives next-token log-probabilities (`generate.judge = auto`), the
LLM's P(yes) on prompts/judge_sufficiency_yesno over the first excerpts (up to
`generate.judge_context_tokens`) is one more feature (its logit) of a second model fitted the same
way, so a weak model's P(yes) is weighed, not trusted. Both models are logistic
(confidence.model), fitted on the training books by `python -m pagerag.train.fit` with
leave-books-out cross-validation; tau comes from the model's out-of-fold accuracy-coverage curve
at `generate.target_cwar`.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

from ..llm import LLM, charged, render_prompt
from ..records import GRAPH_OPERATORS, Evidence, Excerpt, StageCost, Verdict
from ..text.words import stems_of
from .answer import render_excerpts
from .question import QuestionTerms

SUFFICIENCY_FEATURES = ("rcs", "top_prob", "second_prob", "top_lex", "top_attr", "top_names", "top_dense",
                        "top_cand", "cand_top3", "max_dense", "max_lex", "names_evidence", "attr_span", "typed",
                        "graph_paths", "best_path", "community_match", "graph_only_share")
LLM_FEATURE = "p_yes_logit"
TYPE_WORDS = {"money": "sum of money", "year": "year", "date": "date or time", "age": "age", "count": "number",
              "place": "place", "person": "name"}


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


def aggregate(ranked: Sequence[Mapping[str, float]], probs: Sequence[float], level: Mapping[str, float],
              rcs: float, typed: bool) -> dict[str, float]:
    """SUFFICIENCY_FEATURES from the ranked sentences' features (best first) and probabilities,
    the evidence-level signals (with what the graph added: retrieve.api.graph_features) and the
    RCS. No sentence: every sentence feature is 0."""
    top = ranked[0] if ranked else {}
    return {
        "rcs": float(rcs),
        "top_prob": float(probs[0]) if probs else 0.0,
        "second_prob": float(probs[1]) if len(probs) > 1 else 0.0,
        "top_lex": float(top.get("lex", 0.0)),
        "top_attr": float(top.get("attr", 0.0)),
        "top_names": float(top.get("names", 0.0)),
        "top_dense": float(top.get("dense", 0.0)),
        "top_cand": float(top.get("cand", 0.0)),
        "cand_top3": float(any(r.get("cand", 0.0) for r in ranked[:3])),
        "max_dense": max((float(r["dense"]) for r in ranked), default=0.0),
        "max_lex": max((float(r["lex"]) for r in ranked), default=0.0),
        "names_evidence": float(level.get("names_evidence", 0.0)),
        "attr_span": float(level.get("attr_span", 0.0)),
        "typed": float(typed),
        "graph_paths": math.log1p(float(level.get("n_paths", 0.0))),
        "best_path": float(level.get("best_path", 0.0)),
        "community_match": float(level.get("community_match", 0.0)),
        "graph_only_share": float(level.get("graph_only_share", 0.0)),
    }


def p_yes_logit(p_yes: float) -> float:
    """The logit of P(yes), clipped to [0.005, 0.995] so one certain reply cannot dominate."""
    p = min(max(float(p_yes), 0.005), 0.995)
    return math.log(p / (1 - p))


def llm_p_yes(llm: LLM, question: str, excerpts: list[Excerpt], cost: StageCost,
              graph_context: str = "") -> float | None:
    """The LLM's P(yes) that the excerpts state the answer; None when the backend gives no
    log-probabilities. `graph_context`: the labelled block of context.graph_context ("" for none)."""
    if not excerpts:
        return 0.0
    messages = render_prompt("judge_sufficiency_yesno", excerpts=render_excerpts(excerpts), question=question,
                             graph_context=graph_context)
    return charged(llm, cost, lambda: llm.yes_no_logprob(messages))


def judge_excerpts(excerpts: list[Excerpt], max_tokens: int) -> list[Excerpt]:
    """The best excerpts up to `max_tokens` (at least one): a prefix of the answerer's list, so
    the judge prompt and the answer prompt share their beginning."""
    out: list[Excerpt] = []
    used = 0
    for e in excerpts:
        if out and used + e.n_tokens > max_tokens:
            break
        out.append(e)
        used += e.n_tokens
    return out


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


def decide(model, features: Mapping[str, float], tau: float, method: str, terms: QuestionTerms) -> Verdict:
    """The verdict of one fitted sufficiency model: sufficient when P >= tau."""
    p = float(model.score(features))
    sufficient = p >= tau
    shown = ", ".join(f"{k} {features[k]:.2f}" for k in ("rcs", "top_prob", "names_evidence", "attr_span")
                      if k in features)
    if LLM_FEATURE in features:
        shown += f", P(yes) {1 / (1 + math.exp(-features[LLM_FEATURE])):.2f}"
    return Verdict(sufficient, method, "" if sufficient else explain(terms, features, p, tau), round(p, 4),
                   f"P(sufficient) {p:.2f} vs tau {tau:.2f} ({shown})")


def explain(terms: QuestionTerms, features: Mapping[str, float], p: float, tau: float) -> str:
    """One sentence naming the weakest signal, for the refusal message (the decision is `p < tau`)."""
    about = ", ".join(terms.names) if terms.names else "the question's subject"
    if features.get("top_prob", 0.0) == 0.0 and features.get("max_dense", 0.0) == 0.0:
        return "no evidence was retrieved"
    if terms.names and features.get("names_evidence", 1.0) == 0.0:
        return f"the evidence does not mention {about}"
    if features.get("typed") and not features.get("cand_top3"):
        kind = TYPE_WORDS.get(terms.answer.name, "value")
        return f"no evidence sentence about {about} states the {kind} asked for"
    if features.get("attr_span", 1.0) < 0.34 and terms.attribute_words:
        words = ", ".join(f"'{a}'" for a in terms.attribute_words[:4])
        return f"the evidence about {about} says little about {words}"
    return f"no evidence sentence states the answer (P(sufficient) {p:.2f} < tau {tau:.2f})"
