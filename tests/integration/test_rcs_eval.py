"""End to end: rcs_eval on a 60-question slice of HotpotQA (real embedder, spaCy, bm25s)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pagerag.confidence.metrics import oracle_auc_ac

N_QUERIES = 60


@pytest.fixture(scope="module")
def hotpot_slice(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The first 60 questions; the corpus is grouped by question (gold passages, then
    distractors), so keep its passages up to the last gold one needed, minus every second
    distractor to keep embedding short (~350 passages)."""
    src = data_dir / "multihop"
    queries = (src / "hotpotqa_400.queries.jsonl").read_text(encoding="utf-8").splitlines()[:N_QUERIES]
    corpus = (src / "hotpotqa_400.corpus.jsonl").read_text(encoding="utf-8").splitlines()
    needed = {p for line in queries for p in json.loads(line)["gold_pids"]}
    last = max(i for i, line in enumerate(corpus) if json.loads(line)["pid"] in needed)
    out = tmp_path_factory.mktemp("rcs-slice")
    (out / "q.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    kept = [line for i, line in enumerate(corpus[: last + 1]) if json.loads(line)["pid"] in needed or i % 2 == 0]
    (out / "c.jsonl").write_text("\n".join(kept) + "\n", encoding="utf-8")
    return out / "q.jsonl", out / "c.jsonl"


@pytest.fixture(scope="module")
def result(hotpot_slice):
    from pagerag.evaluate.rcs.run import run_rcs_eval

    return run_rcs_eval(*hotpot_slice, n_boot=200)


def test_result_has_every_table_key(result):
    for key in ("base_cwar", "methods", "operating_points", "ece", "brier", "ablation", "transfer"):
        assert key in result
    for name in ("random", "entropy", "max-score", "margin", "lift", "query-len-inv", "temp-scaled", "mlp", "rcs"):
        row = result["methods"][name]
        assert 0.0 <= row["auc_ac"] <= 1.0 and row["ci"][0] <= row["ci"][1]
    assert set(result["ablation"]["delta"]) == set(result["features"])
    assert result["transfer"] is None
    assert result["dataset"]["queries"] == N_QUERIES
    assert result["dataset"]["tune"] + result["dataset"]["test"] == N_QUERIES


def test_reference_rows_follow_from_the_labels(result):
    """random = base success rate exactly; oracle = its brute-force value; nothing beats it."""
    n_test = result["dataset"]["test"]
    success = round((1 - result["base_cwar"]) * n_test)
    y = np.r_[np.ones(success), np.zeros(n_test - success)]
    assert result["methods"]["random"]["auc_ac"] == pytest.approx(1 - result["base_cwar"])
    assert result["methods"]["oracle"]["auc_ac"] == pytest.approx(oracle_auc_ac(y))
    assert all(r["auc_ac"] <= result["methods"]["oracle"]["auc_ac"] + 1e-12 for r in result["methods"].values())
    # dense top-5 finds both gold passages for most, not all, HotpotQA questions
    assert 0.3 < 1 - result["base_cwar"] < 0.95


def test_rcs_model_and_threshold_are_usable(result):
    from pagerag.confidence.model import RCSModel

    model = RCSModel.from_dict(result["model"])
    assert model.feature_names == result["features"]
    assert 0.0 < model.tau <= 1.0
    assert result["threshold"]["tau"] == model.tau
    ops = result["operating_points"]["rcs"]
    assert set(ops) == {"70%", "50%"}
    assert ops["50%"]["cwar"] == pytest.approx(1 - ops["50%"]["accuracy"])


def test_cli_prints_tables_and_writes_json_and_plot(hotpot_slice, result, tmp_path):
    """The command reuses the data prepared above (same files, same process)."""
    import typer
    from typer.testing import CliRunner

    from pagerag.commands.rcs import rcs_eval

    app = typer.Typer()
    app.command("rcs-eval")(rcs_eval)
    app.command("other")(lambda: None)  # two commands, so typer keeps the sub-command name
    q, c = hotpot_slice
    out, png = tmp_path / "rcs.json", tmp_path / "ac.png"
    run = CliRunner().invoke(app, ["rcs-eval", "--queries", str(q), "--corpus", str(c), "--json", str(out),
                                   "--plot", str(png), "--bootstrap", "200", "--quiet"])
    assert run.exit_code == 0, run.output
    assert "Table 1" in run.output and "Table 4" in run.output and "rcs" in run.output
    data = json.loads(out.read_text())
    assert data["methods"]["rcs"]["auc_ac"] == pytest.approx(result["methods"]["rcs"]["auc_ac"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_rejects_a_lone_train_file(hotpot_slice):
    import typer
    from typer.testing import CliRunner

    from pagerag.commands.rcs import rcs_eval
    from pagerag.errors import PageRAGError

    app = typer.Typer()
    app.command("rcs-eval")(rcs_eval)
    app.command("other")(lambda: None)
    q, c = hotpot_slice
    run = CliRunner().invoke(app, ["rcs-eval", "--queries", str(q), "--corpus", str(c), "--train-queries", str(q)])
    assert isinstance(run.exception, PageRAGError) and "go together" in str(run.exception)
