"""`pagerag eval` end to end on a real repository (the training-book excerpt printer_repo, with
questions of that book's training set; extractive backend):
the report, JSON and plots; figures that agree with results.jsonl; malformed question lines
reported with their line numbers and skipped; an interrupted run that leaves a valid partial
report and, resumed (even after a torn last line), gives the same report as an uninterrupted run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from pagerag.commands.corpus import corpus_app
from pagerag.commands.eval import eval_command, load_tasks
from pagerag.errors import ConfigError
from pagerag.evaluate.runner import EvalConfig, read_results, run_eval
from pagerag.repository import read_manifest

PICK = ("Novel-10146-a02", "Novel-10146-u20")  # training questions: answered inside the excerpt; one it never answers
QUESTIONS = ("qa", "train", "Novel-10146.qa.jsonl")
PIPELINES = ["full", "passages-only"]
VOLATILE = {"latency_median_s", "latency_p95_s"}  # wall time differs between runs


def cli_app() -> typer.Typer:
    app = typer.Typer()
    app.command("eval")(eval_command)
    app.add_typer(corpus_app, name="corpus")
    return app


@pytest.fixture(scope="module")
def qa_file(data_dir: Path, tmp_path_factory) -> Path:
    """Two real training questions with three malformed records around them (lines 2, 4, 5)."""
    lines = {json.loads(line)["id"]: line for line in data_dir.joinpath(*QUESTIONS).read_text().splitlines()}
    path = tmp_path_factory.mktemp("qa") / "mini.qa.jsonl"
    path.write_text("\n".join([lines[PICK[0]], '{"id": "broken", "question": ', "",
                               json.dumps({"id": "x", "question": "Who?", "answerable": "maybe"}),
                               json.dumps({"id": "y", "answerable": True, "answers": ["z"]}), lines[PICK[1]]]) + "\n")
    return path


@pytest.fixture(scope="module")
def full_run(qa_file: Path, printer_repo: Path, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "out"
    result = CliRunner().invoke(cli_app(), ["eval", str(qa_file), "--repo", str(printer_repo), "--out", str(out),
                                            "--llm", "extractive", "--quiet"])
    return result, out


def test_eval_writes_report_json_results_and_plots(full_run, printer_repo):
    result, out = full_run
    assert result.exit_code == 0, result.output
    for name in ("results.jsonl", "report.md", "report.json", "run.json", "quality_vs_tokens.png", "refusal_vs_accuracy.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    assert (out / "quality_vs_tokens.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = json.loads((out / "report.json").read_text())
    assert report["meta"]["complete"] and report["meta"]["done"] == report["meta"]["planned"] == 4
    assert "token recall" in report["meta"]["lenient_method"] and report["meta"]["backend"] == "extractive"
    md = (out / "report.md").read_text()
    assert "| Dataset | System | Strict | Lenient | Ref. | Lat. | QTok | BTok |" in md
    assert "| Variant | Lenient Acc. | Ref. | BBS |" in md and "PAGE-RAG (full)" in md and "BDR-RAG (passages-only)" in md
    assert "Table 1" in result.stdout and "Table 3" in result.stdout  # the tables are printed too


def test_report_figures_agree_with_the_result_rows(full_run, printer_repo):
    _, out = full_run
    rows = read_results(out / "results.jsonl")
    assert sorted((r["pipeline"], r["id"]) for r in rows) == sorted((p, q) for p in PIPELINES for q in PICK)
    report = json.loads((out / "report.json").read_text())
    build_tokens = read_manifest(printer_repo)["stats"]["build_tokens"]
    for pipeline in PIPELINES:
        mine = [r for r in rows if r["pipeline"] == pipeline]
        answerable = [r for r in mine if r["answerable"]]
        summary = next(s for s in report["results"] if s["pipeline"] == pipeline and s["dataset"] == "Novel-10146")
        assert summary["answerable"] == 1 and summary["unanswerable"] == 1
        assert summary["strict"] == sum(r["score"]["strict"] for r in answerable)
        assert summary["lenient"] == sum(r["score"]["lenient"] for r in answerable)
        refused = next(r for r in mine if not r["answerable"])["decision"] == "refused"
        assert summary["correct_refusals"] == int(refused)
        assert summary["qtok"] == 0 and summary["btok"] == (0 if pipeline == "passages-only" else build_tokens)
        for r in mine:
            assert r["latency_s"] > 0 and r["decision"] in ("answered", "refused")
            assert bool(r["citations"]) == (r["decision"] == "answered")  # answers cite, refusals do not
    by_type = {(r["pipeline"], r["type"]) for r in report["by_type"]}
    assert {("full", "fact"), ("full", "unanswerable")} <= by_type


def test_malformed_lines_are_reported_with_line_numbers_and_skipped(full_run):
    result, out = full_run
    for line in ("mini.qa.jsonl:2:", "mini.qa.jsonl:4:", "mini.qa.jsonl:5:"):
        assert line in result.stderr, result.stderr
    assert "skipped 3 malformed record(s)" in (out / "report.md").read_text()


def test_interrupted_run_leaves_a_partial_report_and_resume_matches_the_full_run(full_run, qa_file, printer_repo, tmp_path):
    _, reference = full_run
    tasks, notes = load_tasks([str(qa_file)], [printer_repo], None)
    config = EvalConfig(pipelines=PIPELINES, llm="extractive", show_progress=False)
    out = tmp_path / "interrupted"

    def ctrl_c_after_two(row):
        if len(read_results(out / "results.jsonl")) == 2:
            raise KeyboardInterrupt

    first = run_eval(tasks, out, config, notes=notes, on_result=ctrl_c_after_two)
    assert not first.complete and len(first.rows) == 2
    partial = json.loads((out / "report.json").read_text())
    assert partial["meta"]["complete"] is False and partial["meta"]["done"] == 2
    assert "PARTIAL" in (out / "report.md").read_text() and "--resume" in (out / "report.md").read_text()

    with (out / "results.jsonl").open("a") as handle:  # a run killed mid-write leaves a torn line
        handle.write('{"pipeline": "full", "dataset": "Novel-10146", "id": "Novel-10146-u0')
    with pytest.raises(ConfigError, match="--resume"):
        run_eval(tasks, out, config, notes=notes)
    resumed = run_eval(tasks, out, EvalConfig(pipelines=PIPELINES, llm="extractive", resume=True, show_progress=False),
                       notes=notes)
    assert resumed.complete and len(read_results(out / "results.jsonl")) == 4
    assert _stable(json.loads((out / "report.json").read_text())) == _stable(json.loads((reference / "report.json").read_text()))
    decisions = lambda folder: sorted((r["pipeline"], r["id"], r["decision"], r["answer"]) for r in read_results(folder / "results.jsonl"))  # noqa: E731
    assert decisions(out) == decisions(reference)
    with pytest.raises(ConfigError, match="llm"):
        run_eval(tasks, out, EvalConfig(pipelines=PIPELINES, llm="auto", resume=True, show_progress=False))


def _stable(report: dict) -> dict:
    strip = lambda rows: [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]  # noqa: E731
    return {"results": strip(report["results"]), "by_type": strip(report["by_type"]),
            "pipelines": report["meta"]["pipelines"], "datasets": report["meta"]["datasets"]}


def test_a_failing_llm_backend_stops_after_three_questions_and_resume_retries_them(data_dir, printer_repo, tmp_path):
    """A real openai backend against a loopback server that answers 500: each question is
    recorded as a backend error, the run stops after three in a row with a partial report, and
    --resume asks exactly those questions again once the server is healthy."""
    from helpers.openai_server import LoopbackOpenAIServer

    from pagerag.errors import BackendError

    lines = data_dir.joinpath(*QUESTIONS).read_text().splitlines()[:3]
    qa = tmp_path / "three.qa.jsonl"
    qa.write_text("\n".join(lines) + "\n")
    tasks, _ = load_tasks([str(qa)], [printer_repo], None)
    out = tmp_path / "backend"
    with LoopbackOpenAIServer(reply=lambda body: "A bag of gold containing $4,000 [1].", mode="500") as server:
        sets = [f"llm.base_url={server.base_url}", "llm.model=loopback-model", "llm.max_retries=0", "llm.cache=false",
                "llm.timeout_s=5"]
        config = dict(pipelines=["no-evidence-constraint"], llm="openai", sets=sets, show_progress=False)
        with pytest.raises(BackendError, match="3 questions in a row"):
            run_eval(tasks, out, EvalConfig(**config))
        failed = read_results(out / "results.jsonl")
        assert [r["error_kind"] for r in failed] == ["backend"] * 3 and all(r["decision"] == "error" for r in failed)
        report = json.loads((out / "report.json").read_text())
        assert report["meta"]["complete"] is False and report["results"][0]["errors"] == 3
        server.mode = "ok"
        resumed = run_eval(tasks, out, EvalConfig(**config, resume=True))
    # every question was asked again and reached the LLM (whatever the policy then decided)
    assert resumed.complete and [r["id"] for r in resumed.rows] == [r["id"] for r in failed]
    assert all(r["error"] is None and r["decision"] != "error" and r["prompt_tokens"] > 0 for r in resumed.rows)
    assert json.loads((out / "report.json").read_text())["results"][0]["errors"] == 0
