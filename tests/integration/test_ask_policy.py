"""The decision policy branch by branch on a real repository: the RCS gate (refuse, escalate
once, rescue by escalation, pass), the sufficiency model, and the no-evidence-constraint
ablation. RCS models are real RCSModel JSON files whose threshold the test chooses."""
from __future__ import annotations

import pytest
from ask_helpers import permissive_gate, rcs_model_file
from helpers.questions import ANSWER, ANSWERABLE, UNANSWERABLE  # Novel-10146-a02 and -u20 (training set)

from pagerag.api import PageRAG
from pagerag.generate.gate import rcs_gate, retrieval_features
from pagerag.records import INSUFFICIENT, LOW_CONFIDENCE
from pagerag.retrieve.api import retrieve


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tmp_path_factory.mktemp("rcs-models")


def test_low_confidence_widens_once_then_refuses(printer_repo, models):
    gate = {"model_path": str(rcs_model_file(models, "never", bias=-8.0, tau=0.5))}
    answer = PageRAG(printer_repo, llm="extractive", confidence=gate).ask(ANSWERABLE)
    assert answer.decision == "refused" and answer.reason == LOW_CONFIDENCE
    assert answer.escalated and answer.rcs < answer.tau == 0.5
    assert answer.plan["budget_tokens"] == 3000  # the widened route: 1.5x budget
    assert {"path", "community"} & set(answer.plan["operators"])
    assert "escalate" in answer.latency_ms and "below the threshold" in answer.answer
    assert answer.verdict is None and answer.citations == []  # the sufficiency model never ran


def test_low_confidence_without_escalation_refuses_at_once(printer_repo, models):
    gate = {"model_path": str(rcs_model_file(models, "never", bias=-8.0, tau=0.5))}
    answer = PageRAG(printer_repo, llm="extractive", confidence=gate, generate={"escalate": False}).ask(ANSWERABLE)
    assert answer.reason == LOW_CONFIDENCE and not answer.escalated
    assert answer.plan["budget_tokens"] == 2000 and "escalate" not in answer.latency_ms


def test_escalation_can_rescue_a_question(printer_repo, models):
    """A model that trusts what the widened route adds: the first retrieval scores below tau,
    the widened one above, so the policy escalates and goes on to answer."""
    small = {"budget_tokens": 300}  # a budget small enough that widening it changes the evidence
    rag = PageRAG(printer_repo, llm="extractive", retrieve=small)
    first = retrieval_features(retrieve(ANSWERABLE, rag.state, rag.settings, encode=rag.encode), rag.state, rag.encode)
    wide = retrieval_features(retrieve(ANSWERABLE, rag.state, rag.settings, escalate=True, encode=rag.encode),
                              rag.state, rag.encode)
    # whichever retrieval signal the widened route (bigger budget, more operators) moves
    changed = sorted((n for n in first if abs(first[n] - wide[n]) > 1e-6), key=lambda n: -abs(first[n] - wide[n]))
    assert changed, "the widened route should change some retrieval signal"
    name = changed[0]
    sign = 1.0 if wide[name] > first[name] else -1.0
    mid = (first[name] + wide[name]) / 2
    path = rcs_model_file(models, "trusts-widening", bias=0.0, tau=0.5, weights={name: 50.0 * sign}, mean={name: mid})
    answer = PageRAG(printer_repo, llm="extractive", confidence={"model_path": str(path)}, retrieve=small,
                     generate={"target_cwar": 0.99}).ask(ANSWERABLE)  # a lax sufficiency threshold: the gate is tested
    assert answer.escalated and answer.rcs >= answer.tau
    assert answer.decision == "answered" and ANSWER in answer.answer


def test_confident_retrieval_goes_straight_to_the_sufficiency_model(printer_repo, models):
    rag = PageRAG(printer_repo, llm="extractive", confidence=permissive_gate(models),
                  generate={"target_cwar": 0.0001, "offline": "decide"})
    answer = rag.ask(UNANSWERABLE)
    assert not answer.escalated and answer.rcs > answer.tau
    assert answer.reason == INSUFFICIENT and answer.verdict.method == "model"
    # the gate reads the same retrieval the policy used
    retrieval = retrieve(UNANSWERABLE, rag.state, rag.settings, encode=rag.encode)
    assert rcs_gate(retrieval, rag.settings, rag.state, rag.encode).rcs == pytest.approx(answer.rcs, abs=1e-3)


def test_the_sufficiency_model_reads_the_book_rcs_whichever_model_gates(printer_repo, models):
    """The gate may use a calibrated model; the sufficiency model was fitted on the packaged book
    model's score and always reads that."""
    permissive = PageRAG(printer_repo, llm="extractive", confidence=permissive_gate(models)).ask(ANSWERABLE)
    gate = {"model_path": str(rcs_model_file(models, "lukewarm", bias=0.5, tau=0.1))}
    other = PageRAG(printer_repo, llm="extractive", confidence=gate).ask(ANSWERABLE)
    assert permissive.rcs != other.rcs
    assert permissive.verdict.score == pytest.approx(other.verdict.score)


def test_no_evidence_constraint_skips_gate_and_judge(printer_repo, models):
    gate = {"model_path": str(rcs_model_file(models, "never", bias=-8.0, tau=0.5))}
    answer = PageRAG(printer_repo, pipeline="no-evidence-constraint", llm="extractive", confidence=gate).ask(UNANSWERABLE)
    # the ablation answers what the full pipeline refuses, citing whatever it found
    assert answer.decision == "answered" and answer.citations
    assert answer.rcs is None and answer.verdict.method == "skipped"
    assert "gate" not in answer.latency_ms and "judge" not in answer.latency_ms


def test_gate_off_leaves_the_decision_to_the_sufficiency_model(printer_repo, models):
    gate = {"model_path": str(rcs_model_file(models, "never", bias=-8.0, tau=0.5))}
    rag = PageRAG(printer_repo, llm="extractive", confidence=gate, generate={"rcs_gate": "off", "target_cwar": 0.99})
    answered = rag.ask(ANSWERABLE)
    assert answered.decision == "answered" and not answered.escalated  # RCS < tau refuses nothing
    assert answered.rcs is not None and answered.rcs < answered.tau  # still computed and shown
    refused = PageRAG(printer_repo, llm="extractive", confidence=gate,
                      generate={"rcs_gate": "off", "target_cwar": 0.0001, "offline": "decide"}).ask(UNANSWERABLE)
    assert refused.reason == INSUFFICIENT and refused.verdict.method == "model"
