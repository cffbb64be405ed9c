"""`pagerag rcs-eval --queries Q.jsonl --corpus C.jsonl [--train-queries Q2 --train-corpus C2]
[--json OUT] [--plot OUT.png]` (register with `app.command("rcs-eval")(rcs_eval)`).

Evaluates the Retrieval Confidence Score on a multi-hop set ({qid, question, answers, gold_pids}
+ {pid, title, text}) and prints the paper's Tables 1-4 (+ transfer). Heavy imports happen
inside the function so `pagerag --help` stays fast.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def rcs_eval(
    queries: Path = typer.Option(..., "--queries", "-q", help="Multi-hop questions (JSONL: qid, question, gold_pids)."),
    corpus: Path = typer.Option(..., "--corpus", "-c", help="Passages (JSONL: pid, title, text); one entry = one passage."),
    train_queries: Optional[Path] = typer.Option(None, "--train-queries", help="Another set's questions, for the transfer table."),
    train_corpus: Optional[Path] = typer.Option(None, "--train-corpus", help="That set's passages."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write every number (and the fitted model) as JSON here."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Write the accuracy-coverage curves as a PNG here."),
    top_k: int = typer.Option(5, "--top-k", min=1, help="Evidence size: success = every gold passage in the dense top-k."),
    target_cwar: float = typer.Option(0.2, "--target-cwar", min=0.0, max=1.0, help="CWAR target γ for the threshold τ."),
    bootstrap: int = typer.Option(2000, "--bootstrap", min=100, help="Bootstrap resamples for the CIs."),
    limit: Optional[int] = typer.Option(None, "--limit", "-n", min=10, help="Use only the first N questions."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress messages."),
) -> None:
    """RCS against the paper's baselines: AUC-AC with CIs, operating points, calibration, ablation."""
    from rich.console import Console

    from ..evaluate.rcs.report import print_report
    from ..evaluate.rcs.run import run_rcs_eval
    from ..errors import PageRAGError

    if (train_queries is None) != (train_corpus is None):
        raise PageRAGError("--train-queries and --train-corpus go together (the transfer source set)")
    for path in (queries, corpus, train_queries, train_corpus):
        if path is not None and not path.is_file():
            raise PageRAGError(f"{path}: file not found")
    err = Console(stderr=True)
    result = run_rcs_eval(queries, corpus, train_queries, train_corpus, top_k=top_k, target_cwar=target_cwar,
                          n_boot=bootstrap, limit=limit,
                          progress=None if quiet else (lambda msg: err.print(f"[dim]{msg}[/dim]")))
    name = result["dataset"]["name"]
    print_report({name: result}, Console())
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps({k: v for k, v in result.items() if k != "curves"}, indent=1) + "\n",
                            encoding="utf-8")
        err.print(f"JSON: {json_out}")
    if plot:
        from ..evaluate.rcs.plot import plot_accuracy_coverage

        plot_accuracy_coverage(result["curves"], plot, title=f"{name}: accuracy vs coverage (test half)",
                               base_accuracy=1 - result["base_cwar"])
        err.print(f"plot: {plot}")


def calibrate(
    questions: Optional[Path] = typer.Argument(None, help="Labelled questions (JSONL: question, evidence = list of "
                                               "quotes) to refit a repository's RCS gate on; not with --llm."),
    repo: Optional[Path] = typer.Option(None, "--repo", "-r", help="Repository to calibrate; the model is stored inside it."),
    llm: Optional[str] = typer.Option(None, "--llm", help="Fit the answer-or-refuse decision for this LLM backend "
                                      "(openai | llamacpp, configured as for `ask`) on the packaged calibration sample."),
    target_cwar: Optional[float] = typer.Option(None, "--target-cwar", min=0.0, max=1.0,
                                                help="CWAR target γ for τ (default: confidence.target_cwar for the RCS "
                                                "gate; the packaged reader model's target for --llm)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=20, help="--llm: use only the first N sample questions."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress messages."),
) -> None:
    """Refit the RCS gate on labelled questions (<repo>/rcs_model.json), or with --llm fit the
    decision for your LLM: its P(yes) weighed with the reader, on the packaged sample."""
    from ..errors import PageRAGError

    if llm is not None:
        if questions is not None or repo is not None:
            raise PageRAGError("--llm calibrates on the packaged sample: give no QUESTIONS file and no --repo")
        return _calibrate_llm(llm, target_cwar, limit, quiet)
    if questions is None or repo is None:
        raise PageRAGError("give a QUESTIONS file and --repo (refit the RCS gate), or --llm BACKEND")
    from rich.console import Console

    from ..evaluate.calibrate import calibrate_repository

    if not questions.is_file():
        raise PageRAGError(f"{questions}: file not found")
    err = Console(stderr=True)
    progress = None if quiet else (lambda i, n: err.print(f"[dim]retrieved {i}/{n}[/dim]") if i % 10 == 0 or i == n else None)
    model, path = calibrate_repository(questions, repo, target_cwar, progress=progress)
    m = model.metrics
    typer.echo(f"RCS model: {path}\n  {model.training['n']} questions, {model.training['success_rate']:.0%} fully retrieved; "
               f"tau {model.tau:.3f} for target CWAR {model.target_cwar:.0%} -> CWAR {m['calibration_cwar']:.1%} "
               f"at coverage {m['calibration_coverage']:.0%} (on the calibration questions); "
               f"AUC-AC {m['calibration_auc_ac']:.3f}, ECE {m['calibration_ece']:.3f}")


WEAK_JUDGE = 0.2  # held-out pair accuracy below which the calibrated judge is said to be weak


def _calibrate_llm(backend: str, target_cwar: float | None, limit: int | None, quiet: bool) -> None:
    """Fit the LLM judge's threshold (generate.judge: pick or yesno) on the packaged training-book
    pairs (evaluate.llm_calibration)."""
    from ..errors import ConfigError
    from ..evaluate.llm_calibration import calibrate_llm, calls_needed, read_sample, save_decision
    from ..generate.models import CALIBRATION_SAMPLE, llm_decision_path
    from ..llm import get_llm
    from ..progress import StageProgress
    from ..settings import load_settings

    if backend not in ("openai", "llamacpp"):
        raise ConfigError(f"--llm {backend}: calibrate an LLM backend (openai or llamacpp)")
    settings = load_settings(llm=backend)
    judge = settings.generate.judge
    if judge == "model":
        raise ConfigError("generate.judge = model: the reader's model decides, there is no LLM threshold to fit")
    model_llm = get_llm(settings.llm)
    if model_llm is None:
        raise ConfigError(f"--llm {backend}: no such LLM is configured")
    if target_cwar is not None:
        raise ConfigError("--target-cwar applies to a repository's RCS gate; the LLM judge's threshold is fitted on pairs")
    windows = settings.generate.judge_windows
    # with the pick's answers required, the threshold is fitted for the answers ask gives
    tries = settings.generate.answer_excerpts if judge == "pick" and settings.generate.pick_answer == "require" else 0
    rows = read_sample(CALIBRATION_SAMPLE)[:limit]
    total = calls_needed(rows, windows, judge) + (2 * len(rows) if tries else 0)
    what = "P(yes) per excerpt" if judge != "pick" else \
        "sentence named per excerpt" + (", then short answers" if tries else "")
    with StageProgress(enabled=not quiet) as bars:
        with bars.stage(what, total) as advance:
            decision, report = calibrate_llm(model_llm, CALIBRATION_SAMPLE, windows, progress=lambda: advance(1),
                                             limit=limit, judge=judge, answer_tries=tries,
                                             confirm=settings.generate.confirm_answer,
                                             anew=settings.generate.answer_anew)
    path = save_decision(decision, llm_decision_path(model_llm, judge))
    held, fit = report["held_out_by_book"], report["in_sample"]
    typer.echo(f"{judge} judge threshold for {report['backend']} ({report['model']}): {path}\n  tau {report['tau']:.3f} "
               f"({report['feature']}) on {report['pairs']} pairs from {len(report['books'])} training books ({windows} "
               f"excerpts a side); held out by book: answered where the book says {held['answered_where_says']:.0%}, "
               f"refused where it does not {held['refused_where_not']:.0%}, both {held['both']:.0%} (in sample "
               f"{fit['both']:.0%}; a decision from the wording alone: 0%)"
               + ("; an answer counts when its short answer checks out"
                  + (f" and its second reading reaches {report['confirm_at']:.2f}" if report.get("confirm_at") else "")
                  + " and, where the book says, is right" if tries else ""))
    if held["both"] < WEAK_JUDGE:
        from rich.console import Console

        reading = "pick" if judge == "pick" else "P(yes)"
        Console(stderr=True).print(f"[yellow]warning: held out, this model's {reading} gets both sides of only "
                                   f"{held['both']:.0%} of the "
                  "pairs right: its judgements hardly depend on whether the excerpt states the answer[/yellow]")