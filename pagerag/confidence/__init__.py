"""Retrieval Confidence Score (RCS): how far a retrieval can be trusted, before any LLM call.

features           phi1-phi9 of the paper from score lists (+ lexical extras)
evidence_features  extras from the question and the final evidence (mentions, bridges, links)
model              logistic RCSModel on z-scored features, JSON file, scoring in numpy
calibrate          fit_from_labelled: a model + threshold tau for a target CWAR
metrics            AUC-AC, CWAR/accuracy at coverage, ECE, Brier, bootstrap CIs

The multi-hop research harness (`pagerag rcs-eval`: corpora, feature tables, the paper's
baselines, feature selection, reports, plots) lives in pagerag.evaluate.rcs; nothing on the
question path imports it.
"""
