"""`pagerag eval QA_FILE... --repo R [--pipeline NAME ...] [--ablations] [--llm B] [--judge B]
[--out DIR] [--limit N] [--resume]` (register with `app.command("eval")(eval_command)`).

QA inputs are files (the project's JSONL or GraphRAG-Bench's JSON, detected) or `corpus:NAME`.
One `--repo` serves every input; several `--repo` pair with the inputs in order (one book, one
repository: `pagerag eval corpus:carol-qa corpus:cornwall-qa -r carol.rag -r cornwall.rag`).
Heavy imports happen inside the function so `pagerag --help` stays fast.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from ..errors import PageRAGError

DEFAULT_PIPELINES = ["full", "passages-only"]
ABLATIONS = ["no-floor", "raw-graph", "no-evidence-constraint", "no-structural-guidance"]
LLM_CHOICES = ("auto", "openai", "llamacpp", "extractive")


class EvalInterrupted(PageRAGError):
    """Ctrl-C stopped the run after the partial report was written."""

    exit_code = 130


def eval_command(
    qa_files: List[str] = typer.Argument(..., help="Question files (.jsonl/.json) or corpus:NAME."),
    repo: List[Path] = typer.Option(..., "--repo", "-r", help="Repository: one for all inputs, or one per input in order."),
    pipeline: Optional[List[str]] = typer.Option(None, "--pipeline", "-p", help="Pipeline preset (repeatable); default full and passages-only."),
    ablations: bool = typer.Option(False, "--ablations", help="Add the paper's ablations: " + ", ".join(ABLATIONS) + "."),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM backend: auto (default), openai, llamacpp or extractive."),
    judge: Optional[str] = typer.Option(None, "--judge", help="Lenient-accuracy judge backend (openai or llamacpp); default: token recall >= 0.5."),
    out: Path = typer.Option(Path("eval-out"), "--out", "-o", help="Output directory: results.jsonl, report.md, report.json, PNG plots."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=1, help="At most N questions per input, mixed across question types."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out: ask only what results.jsonl lacks."),
    config: Optional[Path] = typer.Option(None, "--config", help="A pagerag.toml file (default: ./pagerag.toml if present)."),
    set_: Optional[List[str]] = typer.Option(None, "--set", help="Override a setting: section.field=value (repeatable)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    doc: Optional[List[str]] = typer.Option(None, "--doc", help="Limit every question to this document of the "
                                            "library (repeatable; see `pagerag docs`). Default: the whole library."),
) -> None:
    """Score answers and refusals on question sets, pipelines side by side (the paper's Tables 1 and 3)."""
    from ..errors import ConfigError
    from ..evaluate.runner import EvalConfig, run_eval

    if llm is not None and llm not in LLM_CHOICES:
        raise ConfigError(f"unknown --llm '{llm}' (choose {', '.join(LLM_CHOICES)})")
    pipelines = choose_pipelines(pipeline, ablations)
    tasks, notes = load_tasks(qa_files, repo, limit)
    cfg = EvalConfig(pipelines=pipelines, llm=llm, judge=judge, config_file=config, sets=list(set_ or []),
                     resume=resume, show_progress=not quiet, docs=list(doc or []))
    outcome = run_eval(tasks, out, cfg, notes=notes)
    report_md = (out / "report.md").read_text(encoding="utf-8")
    sys.stdout.write(_tables_only(report_md))
    if not outcome.complete:
        # an error, not typer.Exit: the CLI runs click with standalone_mode=False, where an Exit
        # code would be returned and lost instead of reaching the shell
        raise EvalInterrupted(f"interrupted: partial report ({len(outcome.rows)} of {outcome.planned} question runs) "
                           f"in {out}; run the same command with --resume to continue")
    typer.echo(f"wrote {out}/report.md, report.json, results.jsonl and plots", err=True)


def choose_pipelines(pipeline: Optional[List[str]], ablations: bool) -> list[str]:
    from ..errors import ConfigError
    from ..settings import available_pipelines

    chosen = list(dict.fromkeys(pipeline or DEFAULT_PIPELINES))
    if ablations:
        chosen += [p for p in ABLATIONS if p not in chosen]
    unknown = [p for p in chosen if p not in available_pipelines()]
    if unknown:
        raise ConfigError(f"unknown pipeline '{unknown[0]}' (available: {', '.join(available_pipelines())})")
    return chosen


def load_tasks(qa_args: list[str], repos: list[Path], limit: int | None):
    """EvalTasks (one per dataset and repository) and notes for the report; malformed records
    are reported on stderr with their line numbers and skipped."""
    from ..corpora import resolve_question_files
    from ..errors import InputError
    from ..evaluate.formats import load_questions, select_for_sources, take_mixed
    from ..evaluate.runner import EvalTask
    from ..repository import read_manifest

    if len(repos) not in (1, len(qa_args)):
        raise InputError(f"give one --repo for all inputs or one per input ({len(qa_args)} inputs, {len(repos)} --repo)")
    notes: list[str] = []
    tasks: dict[tuple[str, str], EvalTask] = {}
    for index, arg in enumerate(qa_args):
        repo = repos[0] if len(repos) == 1 else repos[index]
        documents = _documents(read_manifest(repo))
        for qfile in resolve_question_files([arg]):
            qa = load_questions(qfile.path)
            for problem in qa.problems:
                typer.echo(f"warning: {problem} (skipped)", err=True)
            if qa.problems:
                notes.append(f"{qfile.path.name}: skipped {len(qa.problems)} malformed record(s): {'; '.join(qa.problems[:5])}"
                             + (" …" if len(qa.problems) > 5 else ""))
            items, note = select_for_sources(qa.items, documents)
            if note:
                notes.append(f"{qfile.path.name}: {note}")
            for item in take_mixed(items, limit):
                task = tasks.setdefault((item.dataset, str(repo)), EvalTask(item.dataset, Path(repo), []))
                if any(existing.id == item.id for existing in task.items):
                    notes.append(f"{item.where}: id '{item.id}' already asked in dataset {item.dataset} (skipped)")
                    continue
                task.items.append(item)
    if not tasks:
        raise InputError("no questions to ask (every record was malformed or filtered out)")
    return list(tasks.values()), notes


def _documents(manifest: dict) -> list[str]:
    names: list[str] = []
    for source in manifest.get("sources", []):
        names.append(str(source.get("doc_id", "")))
        if source.get("path"):
            names.append(Path(source["path"]).stem)
    return [n for n in dict.fromkeys(names) if n]


def _tables_only(report_md: str) -> str:
    """The status lines and the Table 1 / Table 3 sections of report.md, for the terminal."""
    keep: list[str] = []
    section = ""
    for line in report_md.splitlines():
        if line.startswith("## "):
            section = line
        if not section or section.startswith(("## Main results", "## Ablations")):
            keep.append(line)
    return "\n".join(keep).rstrip() + "\n"
