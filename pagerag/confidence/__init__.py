"""Retrieval Confidence Score (RCS): how far a retrieval can be trusted, before any LLM call.

features           phi1-phi9 of the paper from score lists (+ lexical extras)
evidence_features  extras from the question and the final evidence (mentions, bridges, links)
model              logistic RCSModel on z-scored features, JSON file, scoring in numpy
calibrate          fit_from_labelled: a model + threshold tau for a target CWAR
metrics            AUC-AC, CWAR/accuracy at coverage, ECE, Brier, bootstrap CIs
baselines          the paper's baselines; selection: CV feature elimination
rcs_eval / report  `pagerag rcs-eval` on multi-hop sets (corpus, eval_features) and its tables
"""
