"""The policy with an in-process GGUF (llamacpp backend): plumbing only. The tiny model
(SmolLM2-135M) cannot judge, so the test checks that the judges' calls -- the pick's (the default:
a numbered-sentence call per excerpt and one on the control text, P(some sentence) from the
model's own token probabilities), yesno's (a yes/no call per excerpt; a quote request where P(yes)
reaches the threshold) and, with judge = model, the answer call -- run, cost what they report,
keep the model loaded, and end in a valid decision."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from ask_helpers import permissive_gate
from helpers.questions import ANSWERABLE, UNANSWERABLE

from pagerag.api import PageRAG
from pagerag.llm.llamacpp_backend import load_count
from pagerag.records import REFUSAL_REASONS

LOCAL_LLM = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "local-llm"


@pytest.fixture(scope="module")
def tiny_gguf() -> Path:
    configured = os.environ.get("PAGERAG_TEST_GGUF")
    if configured:
        if not Path(configured).is_file():
            pytest.skip(f"PAGERAG_TEST_GGUF={configured} is not a file")
        return Path(configured)
    if not LOCAL_LLM.is_file():
        pytest.skip(f"no tiny GGUF: set PAGERAG_TEST_GGUF or provide {LOCAL_LLM}")
    run = subprocess.run([str(LOCAL_LLM), "tiny"], capture_output=True, text=True, timeout=300)
    lines = run.stdout.strip().splitlines()
    if run.returncode != 0 or not lines or not Path(lines[-1]).is_file():
        pytest.skip(f"`{LOCAL_LLM} tiny` gave no GGUF: {run.stderr.strip()[-200:]}")
    return Path(lines[-1])


def test_local_gguf_runs_the_whole_policy(printer_repo, tiny_gguf, tmp_path):
    # n_ctx 1024 and one thread, as the backend tests load it (the first load in a process wins);
    # a judge prompt is one passage (~200 tokens) and a 300-token excerpt budget keeps the answer
    # prompt inside that context too.
    llm = {"backend": "llamacpp", "gguf": str(tiny_gguf), "threads": 1, "n_ctx": 1024, "cache": False}
    windows = PageRAG(printer_repo).settings.generate.judge_windows
    pick = PageRAG(printer_repo, llm=llm, generate={"context_tokens": 300, "answer_max_tokens": 24},
                   confidence=permissive_gate(tmp_path))
    picked = pick.ask(ANSWERABLE)
    loads = load_count()
    # not calibrated for this model: the pick with the threshold packaged for the local 1.5B
    assert picked.verdict.method == "llm-pick (packaged threshold)" and len(picked.judged) == windows
    assert all(0.0 < j["p_some"] < 1.0 for j in picked.judged)  # token probabilities, not a written number
    assert picked.tokens["judge"]["prompt"] > 100 * windows and picked.latency_ms["judge"] > 0
    assert picked.decision == "answered" or picked.reason in REFUSAL_REASONS
    for citation in picked.citations:
        assert citation.quote in pick.state.source_text(citation.doc_id)
    rag = PageRAG(printer_repo, llm=llm, generate={"judge": "yesno", "context_tokens": 300, "answer_max_tokens": 24},
                  confidence=permissive_gate(tmp_path))
    answer = rag.ask(ANSWERABLE)
    # not calibrated for this model (`pagerag calibrate --llm llamacpp`): the window judge at 0.5
    assert answer.backend == "llamacpp" and answer.verdict.method == "llm-windows (uncalibrated)"
    assert 1 <= len(answer.judged) <= windows and [j["n"] for j in answer.judged] == list(range(1, len(answer.judged) + 1))
    # P(yes) from the model's token probabilities: strictly between 0 and 1 (a text reply gives 0 or 1)
    assert all(0.0 < j["p_yes"] < 1.0 for j in answer.judged)
    assert answer.verdict.score == max(j["p_yes"] for j in answer.judged)
    # every excerpt read cost a prompt (llama.cpp's own token counts), all under "judge"
    assert answer.tokens["judge"]["prompt"] > 100 * len(answer.judged) and answer.latency_ms["judge"] > 0
    assert "answer" not in answer.tokens
    assert answer.decision == "answered" or answer.reason in REFUSAL_REASONS
    if answer.decision == "answered":  # only from a quote found in its excerpt, cited from the book
        assert answer.judged[-1]["quote_found"] and len(answer.citations) == 1
    for citation in answer.citations:
        assert citation.quote in rag.state.source_text(rag.state.passages[rag.state.passage_index[citation.passage_id]].doc_id)
    rag.ask(UNANSWERABLE)  # a second question: no new load
    assert load_count() == loads
    # judge = model: the reader's model decides and the LLM is asked no yes/no question; the
    # laxest target CWAR lets the question through, so the answer call must run
    model = PageRAG(printer_repo, llm=llm, generate={"judge": "model", "context_tokens": 300, "answer_max_tokens": 24,
                                                     "target_cwar": 0.99}, confidence=permissive_gate(tmp_path))
    answered = model.ask(ANSWERABLE)
    assert answered.verdict.method == "model" and 0.0 <= answered.verdict.score <= 1.0 and answered.judged == []
    assert not answered.tokens.get("judge", {}).get("prompt")
    assert answered.tokens["answer"]["prompt"] > 100 and answered.latency_ms["answer"] > 0
    assert answered.decision == "answered" or answered.reason in REFUSAL_REASONS
    assert load_count() == loads
