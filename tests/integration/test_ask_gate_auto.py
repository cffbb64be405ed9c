"""`generate.rcs_gate = auto` gates every repository with the packaged book RCS model (fitted
on the training books) when no model was calibrated for it; a calibrated model takes over."""
from __future__ import annotations

import pytest
from ask_helpers import rcs_model_file
from helpers.questions import ANSWERABLE

from pagerag.api import PageRAG
from pagerag.confidence.model import BOOK_MODEL_PATH, RCSModel
from pagerag.generate.gate import REPO_MODEL, load_rcs_model

pytestmark = pytest.mark.slow

QUESTION = ANSWERABLE  # Novel-10146-a02, of the training book printer_repo is built from


def test_auto_gate_uses_the_packaged_book_model(printer_repo):
    rag = PageRAG(printer_repo, llm="extractive")
    model, where = load_rcs_model(rag.settings, printer_repo)
    assert where == str(BOOK_MODEL_PATH) and model.curve and model.training["books"]
    answer = rag.ask(QUESTION)
    assert answer.rcs is not None and answer.tau == pytest.approx(model.tau, abs=1e-4)
    assert 0.0 <= answer.rcs <= 1.0 and "gate" in answer.latency_ms
    assert not any("skipped" in note for note in answer.notes)


def test_gate_cwar_moves_tau_along_the_held_out_curve(printer_repo):
    model = RCSModel.load(BOOK_MODEL_PATH)
    strict = PageRAG(printer_repo, llm="extractive", generate={"gate_cwar": 0.05}).ask(QUESTION)
    lax = PageRAG(printer_repo, llm="extractive", generate={"gate_cwar": 0.6}).ask(QUESTION)
    assert strict.tau == pytest.approx(model.tau_for(0.05), abs=1e-4) and lax.tau == pytest.approx(model.tau_for(0.6), abs=1e-4)
    assert strict.tau >= lax.tau


def test_a_calibrated_repository_model_takes_over(printer_repo, tmp_path):
    own = rcs_model_file(tmp_path, "own", bias=8.0, tau=0.42)  # what `pagerag calibrate` writes
    own.replace(printer_repo / REPO_MODEL)
    try:
        answer = PageRAG(printer_repo, llm="extractive").ask(QUESTION)
        assert answer.tau == 0.42 and answer.rcs > 0.99  # the repository's own model and tau
    finally:
        (printer_repo / REPO_MODEL).unlink()
