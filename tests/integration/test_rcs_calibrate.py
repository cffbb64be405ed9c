"""`pagerag calibrate` on the real training-book repository (printer_repo, copied: the shared
fixture stays untouched) with labelled questions of that book's training set (qa/train)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def repo_copy(printer_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("calib") / "printer.rag"
    shutil.copytree(printer_repo, target)
    return target


def test_calibrate_writes_a_model_the_gate_then_uses(repo_copy: Path, data_dir: Path):
    import typer
    from typer.testing import CliRunner

    from pagerag.commands.rcs import calibrate
    from pagerag.confidence.model import RCSModel
    from pagerag.generate.gate import REPO_MODEL, load_rcs_model
    from pagerag.settings import load_settings

    app = typer.Typer()
    app.command("calibrate")(calibrate)
    app.command("other")(lambda: None)
    # the first 14 training questions (Novel-10146-a01..a14, all answerable: calibration labels
    # those): both labels on the excerpt (a01-a03 and a13 are answered in it, most of the others
    # later in the book), few enough to stay fast
    lines = (data_dir / "qa" / "train" / "Novel-10146.qa.jsonl").read_text(encoding="utf-8").splitlines()[:14]
    questions = repo_copy.parent / "printer14.qa.jsonl"
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = CliRunner().invoke(app, ["calibrate", str(questions), "--repo", str(repo_copy),
                                   "--target-cwar", "0.3", "--quiet"])
    assert run.exit_code == 0, run.output
    assert "tau" in run.output
    path = repo_copy / REPO_MODEL
    model = RCSModel.load(path)
    assert model.target_cwar == 0.3 and 0.0 < model.tau <= 1.0 + 1e-9
    assert model.training["n"] == 14 and 0.0 < model.training["success_rate"] < 1.0
    assert model.metrics["calibration_cwar"] <= 0.3 + 1e-9
    assert "hop1_max" in model.feature_names and "query_len" in model.feature_names
    found, where = load_rcs_model(load_settings(environ={}), repo_copy)
    assert where == str(path) and found.feature_names == model.feature_names
