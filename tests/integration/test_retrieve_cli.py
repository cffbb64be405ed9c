"""`pagerag retrieve` from the command line: JSON keys, the rich view, one-line errors."""
from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from pagerag.cli import app

QUESTION = "How is Scrooge related to Marley?"


def test_json_output_has_the_documented_keys(carol_repo):
    result = CliRunner().invoke(app, ["retrieve", QUESTION, "--repo", str(carol_repo), "--budget", "500", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"analysis", "plan", "evidence", "timings_ms"} <= set(data)
    assert data["plan"]["budget_tokens"] == 500
    assert sum(e["n_tokens"] for e in data["evidence"]) <= 500
    assert data["analysis"]["need"] == "relational"
    for ev in data["evidence"]:
        source = (carol_repo / "sources" / f"{ev['doc_id']}.txt").read_text(encoding="utf-8")
        assert source[ev["start"] : ev["end"]] == ev["text"]


def test_table_output_shows_analysis_plan_and_evidence(carol_repo):
    result = CliRunner().invoke(app, ["retrieve", QUESTION, "--repo", str(carol_repo), "--pipeline", "passages-only"])
    assert result.exit_code == 0, result.output
    assert "need relational" in result.stdout
    assert "plan text → rerank" in result.stdout
    assert "evidence:" in result.stdout and "text, rerank" in result.stdout


def test_path_labels_survive_the_rich_view(carol_repo):
    result = CliRunner().invoke(app, ["retrieve", QUESTION, "--repo", str(carol_repo)])
    assert result.exit_code == 0, result.output
    assert "—[" in result.stdout or "]—" in result.stdout  # "[label]" was not eaten as markup
    assert "—→" not in result.stdout and "←—" not in result.stdout


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pagerag", "retrieve", *args], capture_output=True, text=True, timeout=120)


def test_errors_are_one_line(tmp_path, carol_repo):
    missing = _run(QUESTION, "--repo", str(tmp_path / "none"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no repository" in missing.stderr
    zero = _run(QUESTION, "--repo", str(carol_repo), "--budget", "0")
    assert zero.returncode == 2 and zero.stderr.count("\n") == 1 and "positive" in zero.stderr
    empty = _run("  ", "--repo", str(carol_repo))
    assert empty.returncode == 2 and "empty" in empty.stderr and "Traceback" not in empty.stderr
    preset = _run(QUESTION, "--repo", str(carol_repo), "--pipeline", "nope")
    assert preset.returncode == 2 and "unknown pipeline" in preset.stderr
