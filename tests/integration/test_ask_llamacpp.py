"""The policy with an in-process GGUF (llamacpp backend): plumbing only. The tiny model
(SmolLM2-135M) cannot judge, so the test checks that the yes/no call (P(yes) as a feature of the
LLM sufficiency model) and the answer call run, cost what they report, keep the model loaded,
and end in a valid decision."""
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
    # a 300-token excerpt budget keeps both prompts inside that context.
    rag = PageRAG(printer_repo, llm={"backend": "llamacpp", "gguf": str(tiny_gguf), "threads": 1, "n_ctx": 1024,
                                   "cache": False},
                  generate={"context_tokens": 300, "answer_max_tokens": 24, "target_cwar": 0.99},
                  confidence=permissive_gate(tmp_path))
    answer = rag.ask(ANSWERABLE)
    loads = load_count()
    # not calibrated for this model (`pagerag calibrate --llm llamacpp`): the reader's model decides
    # alone and the LLM is asked no yes/no question (test_ask_openai covers a calibrated LLM)
    assert answer.backend == "llamacpp" and answer.verdict.method == "model" and "P(yes)" not in answer.verdict.detail
    assert 0.0 <= answer.verdict.score <= 1.0
    assert not answer.tokens.get("judge", {}).get("prompt")
    # the laxest target CWAR: the sufficiency model lets the question through, so the answer call must have run
    assert answer.tokens["answer"]["prompt"] > 100 and answer.latency_ms["answer"] > 0
    assert answer.decision == "answered" or answer.reason in REFUSAL_REASONS
    for citation in answer.citations:
        assert citation.quote in rag.state.source_text(rag.state.passages[rag.state.passage_index[citation.passage_id]].doc_id)
    rag.ask(UNANSWERABLE)  # a second question: no new load
    assert load_count() == loads
