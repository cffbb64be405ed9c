"""RCS extras computed from the question and the final evidence, from plain inputs.

The query pipeline calls `evidence_features(...)` once per question with what it already has
(the question's spaCy parse, the evidence passages' texts/subjects/vectors, and the scores of
its hop-2 expansion) and passes the result as `extras` to `features.compute_features`.

Terms: the *evidence* is the final top-k passage list, best first. A passage's *subject* is what
it is about (a title here; the linked entity name in a graph repository); its *head* is its first
HEAD_WORDS words. A *bridge* is an entity named in one of the first evidence passages but not in
the question: the thing the next hop must fetch.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from ..text.names import normalise_mention
from .features import content_word_coverage, evidence_redundancy, mention_coverage

HEAD_WORDS = 8
COMPARATIVE_WORDS = {"first", "earlier", "later", "older", "younger", "longer", "shorter", "both",
                     "same", "more", "less", "higher", "lower", "larger", "smaller", "bigger", "last"}
CLAUSE_DEPS = {"relcl", "acl", "advcl", "ccomp", "xcomp", "pcomp", "conj"}


def question_structure(doc) -> dict[str, float]:
    """Parse counts that track how many hops a question chains (doc: a spaCy Doc).
      q_links       'of' prepositions and possessives ('the father of X's wife')
      q_clauses     verbs heading subordinate/relative/conjoined clauses
      q_comparison  1 for 'which X ..., A or B' comparisons (comparative word + or/both)"""
    links = sum(1 for t in doc if (t.lower_ == "of" and t.dep_ == "prep") or t.tag_ == "POS")
    clauses = sum(1 for t in doc if t.dep_ in CLAUSE_DEPS and t.pos_ in {"VERB", "AUX"})
    comparison = float(any(t.tag_ in {"JJR", "RBR"} or t.lower_ in COMPARATIVE_WORDS for t in doc)
                       and any(t.lower_ in {"or", "both"} for t in doc))
    return {"q_links": float(links), "q_clauses": float(clauses), "q_comparison": comparison}


def content_words(doc) -> list[str]:
    return [t.text for t in doc if t.is_alpha and not t.is_stop]


def passage_head(text: str, n: int = HEAD_WORDS) -> str:
    return " ".join(text.split()[:n])


def subject_of(title: str) -> str:
    """'Grown Ups (film)' -> 'grown ups'; 'Van Hook Township, Mountrail County' -> 'van hook township'."""
    return normalise_mention(re.sub(r"\s*\(.*?\)", "", title).split(",")[0])


def mention_features(mentions: Sequence[str], evidence_texts: Sequence[str],
                     evidence_heads: Sequence[str]) -> dict[str, float]:
    """How many of the question's named things the evidence mentions, and is about (names in a
    head): a question naming two things with a passage each is the easy, question-anchored case."""
    hits, cov = mention_coverage(mentions, evidence_texts)
    head_hits, head_cov = mention_coverage(mentions, evidence_heads)
    return {"q_mentions": float(len(set(mentions))), "mention_cov": cov, "mention_head_cov": head_cov,
            "mention_hits": hits, "mention_head_hits": head_hits}


def evidence_links(subjects: Sequence[str], texts: Sequence[str]) -> dict[str, float]:
    """Does the evidence form a chain? Passage a links to b when a's text names b's subject.
      top1_links    share of the other evidence passages linked to or from the top one
      linked_share  share of evidence passages linked to at least one other"""
    subs = [normalise_mention(s) for s in subjects]
    low = [normalise_mention(t) for t in texts]
    k = len(subs)
    link = np.zeros((k, k), dtype=bool)
    for a in range(k):
        for b in range(k):
            link[a, b] = a != b and len(subs[b]) >= 4 and subs[b] != subs[a] and subs[b] in low[a]
    both = link | link.T
    return {"top1_links": float(both[0, 1:].mean()) if k > 1 else 0.0,
            "linked_share": float(both.any(axis=1).mean()) if k else 0.0}


def bridge_head_hit(bridges: Sequence[tuple[str, int]], evidence_heads: Sequence[str]) -> float:
    """Share of bridge entities (entity, source position) that another evidence passage is about."""
    if not bridges:
        return 0.0
    heads = [normalise_mention(h) for h in evidence_heads]
    return float(np.mean([any(normalise_mention(ent) in h for k, h in enumerate(heads) if k != pos)
                          for ent, pos in bridges]))


def bridge_margin(bridge_sims: np.ndarray, evidence: Sequence[int], sources: Sequence[int]) -> dict[str, float]:
    """How the hop-2 expansion relates to the evidence.

    bridge_sims: (m, N) float scores of m bridge queries over all N candidate passages;
    evidence: the evidence's candidate indices; sources[j]: position in `evidence` of the
    passage bridge query j was built from.
      bridge_in_evidence  share of bridge queries whose best passage (other than their source)
                          is in the evidence
      bridge_margin       max over j of [best score in the evidence without the source] minus
                          [best score outside the evidence]; > 0: the evidence already holds the
                          passage the next hop would fetch; < 0: the expansion found a better one
    """
    S = np.asarray(bridge_sims, dtype=np.float64)
    ev = np.asarray(evidence, dtype=np.int64)
    if S.size == 0 or ev.size < 2:
        return {"bridge_in_evidence": 0.0, "bridge_margin": -1.0}
    outside = np.ones(S.shape[1], dtype=bool)
    outside[ev] = False
    hits, margins = [], []
    for sim, src in zip(S, sources):
        others = np.delete(ev, src)
        masked = sim.copy()
        masked[ev[src]] = -np.inf
        hits.append(int(np.argmax(masked)) in set(others.tolist()))
        best_out = sim[outside].max() if outside.any() else -1.0
        margins.append(sim[others].max() - best_out)
    return {"bridge_in_evidence": float(np.mean(hits)), "bridge_margin": float(max(margins))}


def evidence_features(question_doc, mentions: Sequence[str], evidence_texts: Sequence[str],
                      evidence_subjects: Sequence[str], evidence_vecs: np.ndarray,
                      bridges: Sequence[tuple[str, int]], bridge_sims: np.ndarray,
                      evidence: Sequence[int]) -> dict[str, float]:
    """Every evidence-side extra for one question (see the module docstring for the terms)."""
    heads = [passage_head(t) for t in evidence_texts]
    out = question_structure(question_doc)
    out.update(mention_features(mentions, evidence_texts, heads))
    out.update(evidence_links(evidence_subjects, evidence_texts))
    out.update(bridge_margin(bridge_sims, evidence, [pos for _, pos in bridges]))
    out["bridge_head_hit"] = bridge_head_hit(bridges, heads)
    out["evidence_redundancy"] = evidence_redundancy(evidence_vecs)
    out["qword_cov"] = content_word_coverage(content_words(question_doc), evidence_texts)
    return out


# --------------------------------------------------------------------------------------------
# Bridges: what the next hop must fetch

N_BRIDGE = 3
# Nationalities and languages ('American', 'English') are almost never the bridge of a question.
BRIDGE_LABELS = {"PERSON", "ORG", "GPE", "LOC", "FAC", "EVENT", "WORK_OF_ART", "PRODUCT", "LAW"}


def relation_words(doc, mentions: Sequence[str]) -> str:
    """The question's content words outside its named mentions: the relation a bridge query keeps."""
    named = " ".join(mentions).lower()
    return " ".join(t.text for t in doc if t.is_alpha and not t.is_stop and t.lower_ not in named)


def bridge_entities(passage_docs: Sequence, question: str, n: int = N_BRIDGE) -> list[tuple[str, int]]:
    """First n distinct (entity, source position) named entities of the passages that are neither
    named by the question nor the passage's own subject (named in its first words)."""
    q = normalise_mention(question)
    out: list[tuple[str, int]] = []
    for pos, doc in enumerate(passage_docs):
        head = normalise_mention(" ".join(doc.text.split()[:HEAD_WORDS]))
        for ent in doc.ents:
            text = ent.text.strip().strip('"`\'')
            key = normalise_mention(text)
            if (ent.label_ in BRIDGE_LABELS and key and key not in q and key not in head
                    and key not in [normalise_mention(e) for e, _ in out]):
                out.append((text, pos))
                if len(out) == n:
                    return out
    return out
