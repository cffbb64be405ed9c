"""Run question sets through several pipelines, one after another, on the same questions
(question by question, the pipeline order rotating: see `plan_runs`).

Every result is appended to `<out>/results.jsonl` (one line per question per pipeline) the moment
it is scored, so an interrupted run loses at most the question in flight: `resume=True` reads the
file back and asks only what is missing. Ctrl-C (KeyboardInterrupt) stops the loop and the report
is still written from the rows so far, marked partial. `run.json` records what the rows were
produced with (repositories, LLM, judge); resuming with a different one is refused, since the
rows would no longer be comparable.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import BackendError, ConfigError, InputError
from .formats import QAItem
from .scoring import score_answer

RESULTS = "results.jsonl"
MAX_BACKEND_ERRORS_IN_A_ROW = 3
RUN_FILE = "run.json"


@dataclass
class EvalTask:
    """Questions of one dataset and the repository they are asked of."""

    dataset: str
    repo: Path
    items: list[QAItem]


@dataclass
class EvalConfig:
    pipelines: list[str]
    llm: str | None = None  # LLM backend override (None = the settings' choice, `auto`)
    judge: str | None = None  # lenient judge backend (None = token recall)
    config_file: Path | None = None
    sets: list[str] = field(default_factory=list)  # --set section.field=value
    resume: bool = False
    show_progress: bool = True
    docs: list[str] = field(default_factory=list)  # limit every question to these documents of the library


@dataclass
class EvalOutcome:
    out: Path
    rows: list[dict[str, Any]]
    planned: int
    complete: bool
    summary: dict[str, Any]
    notes: list[str]


def run_eval(tasks: list[EvalTask], out: str | Path, config: EvalConfig, *, notes: list[str] | None = None,
             on_result: Callable[[dict[str, Any]], None] | None = None) -> EvalOutcome:
    """Ask every question of every task under every pipeline; write results, report and plots."""
    from .report import write_report

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _check_datasets(tasks)
    run_info = _run_info(tasks, config)
    previous = _start(out, run_info, config.resume)
    planned = plan_runs(tasks, config.pipelines)
    wanted = {(p, t.dataset, i.id) for p, t, i in planned}
    rows = [r for r in _latest(previous) if _key(r) in wanted]  # other pipelines/questions stay on file only
    done = {_key(r) for r in rows}
    judge = _judge(config)
    complete = False
    failures: list[str] = []
    try:
        with _Progress(config, tasks, rows) as progress, (out / RESULTS).open("a", encoding="utf-8") as sink:
            asker = _Asker(config)
            for pipeline, task, item in planned:
                if (pipeline, task.dataset, item.id) in done:
                    continue
                row = _ask_one(asker, pipeline, task, item, judge)
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                sink.flush()
                rows.append(row)
                progress.advance(row)
                if on_result is not None:
                    on_result(row)
                _stop_after_repeated_backend_errors(row, failures)
        complete = True
    except KeyboardInterrupt:
        pass
    finally:
        summary = write_report(out, rows, tasks, config, run_info, planned=len(planned), complete=complete,
                               notes=list(notes or []), settings_of=pipeline_settings, judge=judge)
    return EvalOutcome(out, rows, len(planned), complete, summary, list(notes or []))


# --------------------------------------------------------------------------------------------
# Start or resume


def plan_runs(tasks: list[EvalTask], pipelines: list[str]) -> list[tuple[str, EvalTask, QAItem]]:
    """Question by question, every pipeline in turn, the pipeline order rotating by one per
    question. Why: the first pipeline to meet a question warms in-process caches for the others
    (its embedding, the sentence windows of its passages; measured: 2-5 s vs 0.2 s), so a fixed
    order would bill all warm-ups to one pipeline's latency; and a partial run then covers every
    pipeline alike, so an interrupted report still compares them on the same questions."""
    runs: list[tuple[str, EvalTask, QAItem]] = []
    position = 0
    for task in tasks:
        for item in task.items:
            turn = position % len(pipelines)
            runs.extend((pipeline, task, item) for pipeline in pipelines[turn:] + pipelines[:turn])
            position += 1
    return runs


def _key(row: dict[str, Any]) -> tuple[str, str, str]:
    return (row["pipeline"], row["dataset"], row["id"])


def _latest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per question and pipeline (the last written); rows of a backend failure are
    dropped, so a resumed run asks those questions again."""
    latest = {_key(r): r for r in rows}
    return [r for r in latest.values() if r.get("error_kind") != "backend"]


def _stop_after_repeated_backend_errors(row: dict[str, Any], failures: list[str]) -> None:
    """One failed LLM call is recorded and the run goes on; several in a row mean the backend is
    down, and asking on would only fill the results with failures."""
    if row.get("error_kind") != "backend":
        failures.clear()
        return
    failures.append(row["error"])
    if len(failures) >= MAX_BACKEND_ERRORS_IN_A_ROW:
        raise BackendError(f"the LLM backend failed on {len(failures)} questions in a row (last: {failures[-1]}); "
                           "the partial report is written: fix the backend and run again with --resume")


def _check_datasets(tasks: list[EvalTask]) -> None:
    seen: dict[str, Path] = {}
    for task in tasks:
        if task.dataset in seen and seen[task.dataset].resolve() != task.repo.resolve():
            raise InputError(f"dataset '{task.dataset}' appears twice with different repositories")
        seen[task.dataset] = task.repo


def _run_info(tasks: list[EvalTask], config: EvalConfig) -> dict[str, Any]:
    return {"repos": {t.dataset: str(t.repo.resolve()) for t in tasks}, "llm": config.llm, "judge": config.judge,
            "sets": list(config.sets), "config_file": str(config.config_file) if config.config_file else None}


def _start(out: Path, info: dict[str, Any], resume: bool) -> list[dict[str, Any]]:
    results = out / RESULTS
    if results.exists() and results.stat().st_size > 0 and not resume:
        raise ConfigError(f"{results} already holds results: pass --resume to continue that run, or choose another --out")
    previous: list[dict[str, Any]] = []
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if resume and results.exists():
        started = _check_same_run(out, info) or started
        previous = read_results(results, repair=True)
    info["started"] = started
    (out / RUN_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")
    if not results.exists():
        results.touch()
    return previous


def _check_same_run(out: Path, info: dict[str, Any]) -> str | None:
    """Refuse to mix rows made with other options; return when the first run started."""
    path = out / RUN_FILE
    if not path.is_file():
        return None
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    for key in ("llm", "judge", "sets", "config_file"):
        if before.get(key) != info.get(key):
            raise ConfigError(f"--resume: this run used {key} = {before.get(key)!r}, now {info.get(key)!r}; "
                              "use the same options or another --out")
    for dataset, repo in info["repos"].items():
        if before.get("repos", {}).get(dataset, repo) != repo:
            raise ConfigError(f"--resume: dataset '{dataset}' was asked of {before['repos'][dataset]}, now of {repo}")
    return before.get("started")


def read_results(path: Path, repair: bool = False) -> list[dict[str, Any]]:
    """The rows of a results file. A torn last line (a run killed mid-write) is dropped, and with
    `repair` cut from the file so appending continues cleanly."""
    rows: list[dict[str, Any]] = []
    good_bytes = 0
    with path.open("rb") as handle:
        for raw in handle:
            try:
                row = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                break
            if not raw.endswith(b"\n"):
                break
            rows.append(row)
            good_bytes += len(raw)
    if repair and good_bytes < path.stat().st_size:
        with path.open("r+b") as handle:
            handle.truncate(good_bytes)
    return rows


def _judge(config: EvalConfig):
    if not config.judge:
        return None
    from ..settings import load_settings
    from .grading import make_judge

    settings = load_settings(config_file=config.config_file, sets=config.sets)
    return make_judge(config.judge, settings.llm)


# --------------------------------------------------------------------------------------------
# Asking


class _Asker:
    """One PageRAG per (pipeline, repository), made on first use (the repository state, the
    embedder and a local model are shared across them by their own caches)."""

    def __init__(self, config: EvalConfig):
        self.config = config
        self.docs = list(config.docs) or None  # the library's documents every question is limited to
        self._rags: dict[tuple[str, str], Any] = {}

    def rag(self, pipeline: str, repo: Path):
        key = (pipeline, str(repo))
        if key not in self._rags:
            from ..api import PageRAG

            self._rags[key] = PageRAG(repo, settings=pipeline_settings(pipeline, self.config))
        return self._rags[key]


def pipeline_settings(pipeline: str, config: EvalConfig):
    from ..settings import load_settings

    return load_settings(pipeline, config.config_file, sets=config.sets, llm=config.llm or None)


def _ask_one(asker: _Asker, pipeline: str, task: EvalTask, item: QAItem, judge) -> dict[str, Any]:
    rag = asker.rag(pipeline, task.repo)
    start = time.perf_counter()
    error, kind = None, None
    try:
        answer = rag.ask(item.question, docs=asker.docs).to_dict()
    except InputError as exc:  # this question cannot be asked (e.g. too long): recorded, never retried
        answer, error, kind = None, str(exc), "input"
    except BackendError as exc:  # the LLM failed (timeout, bad reply): recorded, retried by --resume
        answer, error, kind = None, str(exc), "backend"
    latency = time.perf_counter() - start
    if answer is None:
        answer = {"decision": "error", "answer": "", "reason": None, "citations": [], "plan": {}, "tokens": {},
                  "latency_ms": {}, "backend": "", "rcs": None, "tau": None, "escalated": False}
    judged_before = (judge.prompt_tokens, judge.completion_tokens) if judge else (0, 0)
    score = score_answer(item, answer["decision"], answer["answer"], answer["citations"], judge)
    row = _row(pipeline, task, item, answer, score, latency, error, judge, judged_before)
    row["error_kind"] = kind
    return row


def _row(pipeline: str, task: EvalTask, item: QAItem, answer: dict[str, Any], score, latency: float,
         error: str | None, judge, judged_before: tuple[int, int]) -> dict[str, Any]:
    tokens = answer.get("tokens") or {}
    plan = answer.get("plan") or {}
    row = {
        "pipeline": pipeline, "dataset": task.dataset, "id": item.id, "type": item.type, "answerable": item.answerable,
        "question": item.question, "gold": item.answers[:1],
        "decision": answer["decision"], "label": answer.get("label", "answer"), "reason": answer.get("reason"),
        "answer": answer.get("answer", ""),
        "citations": [{k: c.get(k) for k in ("passage_id", "file", "start", "end", "line", "page", "page_label",
                                             "section", "quote")}
                      for c in answer.get("citations", [])],
        "rcs": answer.get("rcs"), "tau": answer.get("tau"), "escalated": bool(answer.get("escalated")),
        "need": plan.get("need"), "operators": plan.get("operators"), "budget_tokens": plan.get("budget_tokens"),
        "backend": answer.get("backend"),
        "prompt_tokens": sum(t.get("prompt", 0) for t in tokens.values()),
        "completion_tokens": sum(t.get("completion", 0) for t in tokens.values()),
        "stage_tokens": tokens, "stage_latency_ms": answer.get("latency_ms") or {},
        "latency_s": round(latency, 4), "score": score.to_dict(), "error": error,
        "notes": list(answer.get("notes") or []),  # e.g. why the RCS gate was skipped
    }
    if judge is not None:
        row["judge_tokens"] = {"prompt": judge.prompt_tokens - judged_before[0],
                               "completion": judge.completion_tokens - judged_before[1]}
    return row


# --------------------------------------------------------------------------------------------
# Progress


class _Progress:
    """One bar per pipeline, with running strict/lenient accuracy and refusal counts."""

    def __init__(self, config: EvalConfig, tasks: list[EvalTask], rows: list[dict[str, Any]]):
        self.enabled = config.show_progress and os.environ.get("PAGERAG_NO_PROGRESS") != "1"
        self.totals = {p: sum(len(t.items) for t in tasks) for p in config.pipelines}
        self.rows: dict[str, list[dict[str, Any]]] = {p: [r for r in rows if r["pipeline"] == p] for p in config.pipelines}
        self._progress = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> "_Progress":
        if not self.enabled:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("[bold]{task.description:<24}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[figures]}"), TimeElapsedColumn(),
                                  console=Console(stderr=True))
        self._progress.__enter__()
        for pipeline, total in self.totals.items():
            self._tasks[pipeline] = self._progress.add_task(pipeline, total=total, completed=len(self.rows[pipeline]),
                                                            figures=running_figures(self.rows[pipeline]))
        return self

    def advance(self, row: dict[str, Any]) -> None:
        self.rows[row["pipeline"]].append(row)
        if self._progress is not None:
            self._progress.update(self._tasks[row["pipeline"]], advance=1,
                                  figures=running_figures(self.rows[row["pipeline"]]))

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


def running_figures(rows: list[dict[str, Any]]) -> str:
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    strict = sum(r["score"]["strict"] for r in answerable)
    lenient = sum(r["score"]["lenient"] for r in answerable)
    refused = sum(bool(r["score"]["correct_refusal"]) for r in unanswerable)
    false_ref = sum(bool(r["score"]["false_refusal"]) for r in answerable)
    if not rows:
        return "waiting"
    acc = f"strict {strict}/{len(answerable)} lenient {lenient}/{len(answerable)}" if answerable else "acc -"
    ref = f"ref {refused}/{len(unanswerable)}" if unanswerable else "ref -"
    return f"{acc} · {ref} · false ref {false_ref}"
