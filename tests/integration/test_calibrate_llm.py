"""`pagerag calibrate --llm openai` through a real OpenAI-compatible server on loopback: the LLM's
P(yes) is measured on the packaged calibration sample, a decision is fitted for that backend and
model, stored, and then used by `ask`; a backend without log-probabilities is a one-line error."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pagerag.confidence.model import RCSModel
from pagerag.evaluate.llm_calibration import read_sample
from pagerag.generate.models import CALIBRATION_SAMPLE
from tests.helpers.openai_server import LoopbackOpenAIServer

LIMIT = 60


def oracle_logprobs():
    """A loopback LLM that knows which sample questions the excerpts answer (the sample's labels):
    its P(yes) carries information the reader's P does not fully have."""
    rows = [r for r in read_sample(CALIBRATION_SAMPLE) if r.get("label") is not None][:LIMIT]
    supported = [r["question"] for r in rows if r["label"] == 1]

    def logprobs(body: dict) -> dict[str, float]:
        prompt = body["messages"][-1]["content"]
        if any(q in prompt for q in supported):
            return {"Yes": -0.05, "No": -3.0}
        return {"Yes": -3.0, "No": -0.05}

    return logprobs


def run_cli(args: list[str], server: LoopbackOpenAIServer, cache) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-loopback",
           "PAGERAG_CACHE_DIR": str(cache), "PAGERAG_LLM__CACHE": "false"}
    return subprocess.run([sys.executable, "-m", "pagerag", *args], capture_output=True, text=True, env=env, timeout=600)


def test_calibrate_fits_and_stores_a_decision_for_the_backend_and_model(tmp_path):
    with LoopbackOpenAIServer(top_logprobs=oracle_logprobs()) as server:
        done = run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path)
        asked = server.counts["/v1/chat/completions"]
    assert done.returncode == 0, done.stderr
    path = tmp_path / "calibration" / "openai-loopback-model.json"
    assert path.is_file() and str(path) in done.stdout
    model = RCSModel.load(path)
    assert asked == LIMIT  # one yes/no call per sample question
    assert model.feature_names == ["suff_logit", "p_yes_logit"]
    aucs = model.training["held_out_auc_ac"]
    assert aucs["reader model + P(yes)"] > aucs["reader model"]  # an informative LLM adds to the reader
    assert model.weights[1] > 0 and model.curve and 0.0 < model.tau < 1.0


def test_a_backend_without_log_probabilities_is_one_line(tmp_path):
    with LoopbackOpenAIServer(mode="ignore_logprobs") as server:
        done = run_cli(["calibrate", "--llm", "openai", "--limit", "20", "--quiet"], server, tmp_path)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "log-probabilities" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "calibration").exists()


@pytest.mark.slow
def test_ask_weighs_the_llm_with_the_reader_once_calibrated(printer_repo, tmp_path, monkeypatch):
    from pagerag.api import PageRAG

    question = "Who edited the Minnesotian?"
    with LoopbackOpenAIServer(top_logprobs=oracle_logprobs(), reply=lambda body: "Dr. Foster [1].") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-loopback")
        monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path))
        before = PageRAG(printer_repo, llm="openai", generate={"rcs_gate": "off"}).ask(question)
        assert before.verdict is not None and before.verdict.method == "model"  # not calibrated: the reader decides
        assert run_cli(["calibrate", "--llm", "openai", "--limit", str(LIMIT), "--quiet"], server, tmp_path).returncode == 0
        after = PageRAG(printer_repo, llm="openai", generate={"rcs_gate": "off"}).ask(question)
    assert after.verdict is not None and after.verdict.method == "model+llm"
    assert "P(yes)" in after.verdict.detail
