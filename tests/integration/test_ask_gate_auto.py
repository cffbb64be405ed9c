"""`generate.rcs_gate = auto` gates only with a model calibrated for the repository's kind of
text; `on` also uses the packaged (Wikipedia multi-hop) model."""
from __future__ import annotations

import pytest

from pagerag.api import PageRAG

pytestmark = pytest.mark.slow

QUESTION = "How much does Scrooge say his clerk earns per week?"


def test_auto_gate_skips_the_uncalibrated_packaged_model(carol_repo):
    answer = PageRAG(carol_repo, llm="extractive").ask(QUESTION)
    assert answer.rcs is None and answer.reason != "low_retrieval_confidence"
    assert any("pagerag calibrate" in note for note in answer.notes)


def test_gate_on_uses_the_packaged_model(carol_repo):
    answer = PageRAG(carol_repo, llm="extractive", generate={"rcs_gate": "on"}).ask(QUESTION)
    assert answer.rcs is not None and answer.tau is not None
    assert 0.0 <= answer.rcs <= 1.0
