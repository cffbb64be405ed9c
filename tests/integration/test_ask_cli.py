"""`pagerag ask` and `pagerag doctor` as command functions, run through typer's test runner
(the same functions pagerag/cli.py registers)."""
from __future__ import annotations

import json

import pytest
import typer
from ask_helpers import permissive_gate
from helpers.questions import ANSWER, ANSWERABLE, EXCERPT_FILE, UNANSWERABLE
from typer.testing import CliRunner

from pagerag.commands.ask import ask, doctor
from pagerag.errors import ConfigError, InputError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
app.command()(ask)
app.command()(doctor)


@pytest.fixture(scope="module")
def gate_flag(tmp_path_factory) -> list[str]:
    return ["--set", f"confidence.model_path={permissive_gate(tmp_path_factory.mktemp('rcs'))['model_path']}"]


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(app, list(args), input=input)


def test_text_output_has_answer_citations_and_diagnostics(printer_repo, gate_flag):
    result = run("ask", ANSWERABLE, "--repo", str(printer_repo),
                 "--llm", "extractive", *gate_flag)
    assert result.exit_code == 0, result.output
    out = result.output
    # offline, even a passage the model finds sufficient is shown as the closest passage
    assert out.startswith("Closest passage (offline, the reader cannot check that it answers the question; "
                          "P(sufficient) 0.") and ANSWER in out
    decided = run("ask", ANSWERABLE, "--repo", str(printer_repo), "--llm", "extractive", *gate_flag,
                  "--pipeline", "reader-decides")
    assert decided.exit_code == 0 and decided.output.startswith("Answer: ") and ANSWER in decided.output
    assert "[1] \u201c" in out and f"{EXCERPT_FILE}, line " in out
    for label in ("route: ", "RCS ", "sufficiency: model: sufficient; P(sufficient) ", "tokens (prompt+completion): none", "latency: "):
        assert label in out


def test_json_output_shows_the_packaged_book_gate_by_default(printer_repo, monkeypatch):
    """A fresh repository, no calibration, no settings: the packaged book RCS model gates it."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("PAGERAG_LLM__GGUF", raising=False)
    result = run("ask", UNANSWERABLE, "--repo", str(printer_repo), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) >= {"decision", "label", "caveat", "answer", "reason", "citations", "rcs", "tau", "plan", "tokens",
                         "latency_ms"}
    assert isinstance(data["rcs"], float) and isinstance(data["tau"], float) and 0 <= data["rcs"] <= 1
    assert not any("gate skipped" in note for note in data["notes"])
    assert "gate" in data["latency_ms"]
    assert data["backend"] == "extractive"  # auto picks it when nothing is configured
    if data["decision"] == "refused":  # offline, only the gate refuses
        assert data["reason"] == "low_retrieval_confidence"
    else:
        assert data["label"] == "closest_passage" and "cannot check" in data["caveat"]


def test_interactive_answers_until_an_empty_line(printer_repo, gate_flag):
    # a target CWAR no threshold reaches: every question is refused, so the loop is what is tested
    result = run("ask", "--repo", str(printer_repo), "--interactive", "--llm", "extractive", *gate_flag,
                 "--set", "generate.target_cwar=0.0001", "--set", "generate.offline=decide",
                 input=f"{UNANSWERABLE}\n   \nnever asked\n")
    assert result.exit_code == 0, result.output
    assert result.output.count("Refused (insufficient_evidence)") == 1
    assert "never asked" not in result.output


def test_bad_input_is_one_clear_error(printer_repo, tmp_path):
    result = run("ask", "  ", "--repo", str(printer_repo))
    assert isinstance(result.exception, InputError) and "question is empty" in str(result.exception)
    result = run("ask", "Who?", "--repo", str(printer_repo), "--llm", "gpt")
    assert isinstance(result.exception, ConfigError) and "--llm" in str(result.exception)
    result = run("ask", "Who?", "--repo", str(tmp_path / "missing.rag"))
    assert result.exit_code != 0 and "\n" not in str(result.exception).strip()


def test_doctor_says_which_backend_auto_picks_and_why(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("PAGERAG_LLM__GGUF", raising=False)
    result = run("doctor")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["LLM", "backend", "extractive"] and "no endpoint" in lines[0]
    assert any(line.startswith("embedding model") and " ok " in line for line in lines)
    assert any(line.startswith("prompts") and " ok " in line for line in lines)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert "openai" in run("doctor").output.splitlines()[0]
