"""The evidence read sentence by sentence: features against the question, the ranker's order,
and the extractive answer (the ranker's best sentence, its typed value first)."""
from __future__ import annotations

import numpy as np
import pytest

from pagerag.confidence.model import RCSModel
from pagerag.generate.extractive import extractive_answer, quote_span, typed_value
from pagerag.generate.question import read_question
from pagerag.generate.sentences import SENTENCE_FEATURES, evidence_sentences, rank_sentences, window_order
from pagerag.records import Evidence, Window
from pagerag.text.sentences import split_sentences


def flat_idf(_stem: str) -> float:
    return 1.0


def _read(question: str, *texts: str, cosines=None):
    """One evidence passage per text (ranked in order), one window covering each."""
    windows = [Window(f"doc:{i}", f"doc{i}", f"doc{i}.txt", 0, len(t), t, split_sentences(t)) for i, t in enumerate(texts)]
    evidence = [Evidence(f"doc:{i}", f"doc{i}", f"doc{i}.txt", 0, len(t), t, 10, ["text"], {}, rank=i + 1)
                for i, t in enumerate(texts)]
    terms = read_question(question)
    return terms, windows, evidence_sentences(terms, windows, cosines or [0.5] * len(texts), evidence, flat_idf)


def test_sentence_features_describe_the_question_in_the_sentence():
    _, _, sents = _read("How much did Joe pay the charwoman for the curtains?",
                        "The curtains came down. Joe paid the charwoman two shillings for them. She laughed.")
    assert [s.text for s in sents][1] == "Joe paid the charwoman two shillings for them."
    f = {s.text: s.features for s in sents}
    paid = f["Joe paid the charwoman two shillings for them."]
    assert set(SENTENCE_FEATURES) <= set(paid)
    assert paid["cand"] == 1.0 and paid["cand_miss"] == 0.0 and paid["names"] == 1.0
    assert paid["attr"] > f["She laughed."]["attr"] == 0.0
    assert paid["lex_gap"] == 0.0 and f["She laughed."]["lex_gap"] < 0
    # the neighbours' words count in the context features only
    assert f["She laughed."]["lex_ctx"] > f["She laughed."]["lex"]
    assert sents[1].candidates and sents[1].text[sents[1].candidates[0][0] - sents[1].start:
                                                 sents[1].candidates[0][1] - sents[1].start] == "two shillings"


def test_rank_follows_the_evidence_order_and_the_window_cosine():
    _, _, sents = _read("What did Joe sell?", "Joe sold a horse.", "Joe sold a horse too.", cosines=[0.2, 0.9])
    assert [s.features["rank"] for s in sents] == pytest.approx([np.log(2), np.log(3)])
    assert [s.features["dense"] for s in sents] == [0.2, 0.9]
    assert sents[0].features["dense_gap"] == pytest.approx(-0.7) and sents[1].features["dense_gap"] == 0.0


def _ranker(weights: dict[str, float]) -> RCSModel:
    names = list(SENTENCE_FEATURES)
    return RCSModel(names, [0.0] * len(names), [1.0] * len(names), [weights.get(n, 0.0) for n in names], 0.0)


def test_the_ranker_orders_sentences_and_the_windows_follow():
    _, windows, sents = _read("How much did Joe pay the charwoman?",
                              "Joe talked to the charwoman at length.", "It was cold. Joe paid her two shillings.")
    ranked = rank_sentences(sents, _ranker({"cand": 5.0, "attr": 1.0}))
    assert ranked[0].text == "Joe paid her two shillings." and ranked[0].prob > ranked[-1].prob
    assert all(0.0 < s.prob < 1.0 for s in ranked)
    assert window_order(ranked, windows)[0] is windows[1]


def test_extractive_answer_states_the_typed_value_then_quotes_its_sentence():
    _, _, sents = _read("How much did Joe pay the charwoman?", "It was cold. Joe paid the charwoman two shillings.")
    ranked = rank_sentences(sents, _ranker({"cand": 5.0}))
    assert typed_value(ranked[0]) == "two shillings"

    class State:  # make_excerpt reads the source text and nothing else
        def source_text(self, doc_id):
            return "It was cold. Joe paid the charwoman two shillings."

    text, cited = extractive_answer(ranked, State(), extend_short=False)
    assert text == "two shillings: \u201cJoe paid the charwoman two shillings.\u201d [1]"
    assert cited[0].text == "Joe paid the charwoman two shillings." and cited[0].n == 1
    _, _, plain = _read("What did Joe do?", "Joe paid the charwoman.")
    assert typed_value(rank_sentences(plain, _ranker({}))[0]) == ""


def test_a_too_short_quote_takes_its_neighbour_when_asked():
    _, _, sents = _read("What did Scrooge pay his clerk?", "Scrooge paid his clerk. 'Ten pounds.' That was all.")
    short = next(s for s in sents if s.text == "'Ten pounds.'")
    text = short.window.text
    start, end = quote_span(short, extend_short=True)
    assert text[start:end] == "Scrooge paid his clerk. 'Ten pounds.'"
    assert quote_span(short, extend_short=False) == (short.start, short.end)


def test_graph_features_of_operators_that_did_not_run_add_nothing():
    """passages-only runs no community or path operator: its graph features are unobserved, not
    "no match", and must not move P(sufficient) (a zero community score once made it certain)."""
    from pagerag.confidence.model import RCSModel
    from pagerag.generate.sufficiency import unobserved_as_typical

    names = ["rcs", "community_match", "best_path"]
    model = RCSModel(names, [0.5, 0.5, 0.3], [0.25, 0.1, 0.3], [1.0, -0.4, 0.2], 0.0)
    raw = {"rcs": 0.5, "community_match": 0.0, "best_path": 0.0}
    text_only = unobserved_as_typical(model, raw, ["text", "rerank"])
    assert text_only == {"rcs": 0.5, "community_match": 0.5, "best_path": 0.3}
    assert abs(model.score(text_only) - 0.5) < 1e-9  # rcs at its mean, the graph group neutral
    assert model.score(raw) > 0.85  # what the zeros did
    assert unobserved_as_typical(model, raw, ["text", "path", "community"]) == raw  # observed: kept
