"""The evidence read sentence by sentence: features against the question, the windows ordered by
the reader's probabilities, and the extractive answer (the reader's span, else its sentence)."""
from __future__ import annotations

import numpy as np
import pytest

from pagerag.generate.extractive import extractive_answer, quote_span
from pagerag.generate.question import read_question
from pagerag.generate.sentences import SENTENCE_FEATURES, evidence_sentences, window_order
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


class _Source:
    """make_excerpt reads the source text and its place (a plain text has no page or section)."""

    def __init__(self, text: str):
        self.text = text

    def source_text(self, doc_id):
        return self.text

    def place(self, doc_id, offset):
        from pagerag.structure import Place

        return Place()


def test_sentence_features_describe_the_question_in_the_sentence():
    _, _, sents = _read("What did Josiah pay the ferryman for the lanterns?",
                        "The lanterns were old. Josiah paid the ferryman a silver button for them. The river rose.")
    assert [s.text for s in sents][1] == "Josiah paid the ferryman a silver button for them."
    f = {s.text: s.features for s in sents}
    paid = f["Josiah paid the ferryman a silver button for them."]
    assert set(paid) == set(SENTENCE_FEATURES) and len(SENTENCE_FEATURES) == 10
    assert paid["names"] == 1.0
    assert paid["attr"] > f["The river rose."]["attr"] == 0.0
    assert paid["lex_gap"] == 0.0 and f["The river rose."]["lex_gap"] < 0
    # the neighbours' words count in the context features only
    assert f["The river rose."]["lex_ctx"] > f["The river rose."]["lex"]


def test_rank_follows_the_evidence_order_and_the_window_cosine():
    _, _, sents = _read("What did Josiah sell?", "Josiah sold a mule.", "Josiah sold a mule too.", cosines=[0.2, 0.9])
    assert [s.features["rank"] for s in sents] == pytest.approx([np.log(2), np.log(3)])
    assert [s.features["dense"] for s in sents] == [0.2, 0.9]
    assert sents[0].features["dense_gap"] == pytest.approx(-0.7) and sents[1].features["dense_gap"] == 0.0


def test_windows_follow_the_readers_best_sentence():
    _, windows, sents = _read("What did Josiah pay the ferryman?",
                              "Josiah talked to the ferryman at length.", "It was cold. Josiah paid him a button.")
    for s, p in zip(sents, (0.2, 0.1, 0.9)):
        s.prob = p
    ranked = sorted(sents, key=lambda s: -s.prob)
    assert ranked[0].text == "Josiah paid him a button."
    assert window_order(ranked, windows) == [windows[1], windows[0]]
    assert window_order([], windows) == windows  # nothing read: the evidence order


def test_extractive_answer_is_the_readers_span_when_its_margin_is_enough_else_the_quote():
    text = "It was cold. Josiah paid the ferryman a silver button."
    _, _, sents = _read("What did Josiah pay the ferryman?", text)
    best = sents[1]
    best.prob, best.margin = 0.9, 2.0
    best.span = (best.start + best.text.index("a silver button"), best.start + len(best.text) - 1)
    answer, cited = extractive_answer([best], _Source(text), extend_short=False, span_margin=1.0)
    assert answer == "a silver button [1]"
    assert cited[0].text == "Josiah paid the ferryman a silver button." and cited[0].n == 1
    quoted, _ = extractive_answer([best], _Source(text), extend_short=False, span_margin=3.0)
    assert quoted == "\u201cJosiah paid the ferryman a silver button.\u201d [1]"
    assert extractive_answer([], _Source(text)) == ("", [])


def test_a_too_short_quote_takes_its_neighbour_when_asked():
    _, _, sents = _read("What did Josiah pay the ferryman?", "Josiah paid the ferryman. 'A button.' That was all.")
    short = next(s for s in sents if s.text == "'A button.'")
    text = short.window.text
    start, end = quote_span(short, extend_short=True)
    assert text[start:end] == "Josiah paid the ferryman. 'A button.'"
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
