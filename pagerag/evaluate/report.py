"""report.md (the paper's Table 1 and Table 3 layouts, then per-type detail), report.json and
the plots, written from the result rows. Called at the end of every run, including an
interrupted one (the report then says it is partial and how to resume).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from .summary import ALL, summarise_run

DISPLAY = {
    "full": "PAGE-RAG (full)",
    "passages-only": "BDR-RAG (passages-only)",
    "no-floor": "No Floor",
    "raw-graph": "Raw Graph",
    "no-evidence-constraint": "No Evidence Constraint",
    "no-structural-guidance": "No Structural Guidance",
}


def display_name(pipeline: str) -> str:
    return DISPLAY.get(pipeline, pipeline)


def write_report(out: Path, rows: list[dict[str, Any]], tasks, config, run_info: dict[str, Any], *, planned: int,
                 complete: bool, notes: list[str], settings_of: Callable[[str, Any], Any], judge=None) -> dict[str, Any]:
    """Write report.json, report.md and the PNG plots; return the report object.
    `settings_of(pipeline, config)` is the runner's `pipeline_settings` (passed in: the runner
    imports this module, not the other way round)."""
    datasets = [t.dataset for t in tasks]
    btok = build_tokens(tasks, config, settings_of)
    summary = summarise_run(rows, list(config.pipelines), datasets, btok)
    meta = _meta(rows, tasks, config, run_info, planned, complete, notes, judge)
    report = {"meta": meta, **summary}
    _write_atomic(out / "report.json", json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    plots: list[str] = []
    if rows:
        try:
            from .plots import write_plots

            plots = write_plots(out, report)
        except Exception as exc:  # noqa: BLE001 - a plot must never cost the report
            meta["notes"].append(f"plots not written: {exc.__class__.__name__}: {exc}")
    meta["plots"] = plots
    _write_atomic(out / "report.json", json.dumps(report, indent=2, ensure_ascii=False, default=str) + "\n")
    _write_atomic(out / "report.md", render_markdown(report))
    return report


def build_tokens(tasks, config, settings_of: Callable[[str, Any], Any]) -> dict[tuple[str, str], int]:
    """BTok per (pipeline, dataset): the repository manifest's build LLM tokens, 0 for a
    pipeline that reads no graph (it would need no graph build; `settings_of(pipeline, config)`
    says which do)."""
    from ..repository import read_manifest

    out: dict[tuple[str, str], int] = {}
    for pipeline in config.pipelines:
        reads_graph = settings_of(pipeline, config).retrieve.graph != "none"
        for task in tasks:
            stats = read_manifest(Path(task.repo)).get("stats", {})
            out[(pipeline, task.dataset)] = int(stats.get("build_tokens") or 0) if reads_graph else 0
    return out


def _meta(rows, tasks, config, run_info, planned, complete, notes, judge) -> dict[str, Any]:
    backends = sorted({r["backend"] for r in rows if r.get("backend")})
    if judge is not None:
        lenient = (f"LLM judge {judge.name} (prompts/judge_answer.txt) for answers that do not match strictly; "
                   f"judge cost {judge.prompt_tokens:,} prompt + {judge.completion_tokens:,} completion tokens, "
                   "not counted in QTok")
    else:
        lenient = "token recall of the gold answer >= 0.5 (no --judge given)"
    return {
        "complete": complete, "done": len(rows), "planned": planned,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "started": run_info.get("started"),
        "pipelines": list(config.pipelines),
        "datasets": [{"name": t.dataset, "repo": str(t.repo), "questions": len(t.items),
                      "answerable": sum(i.answerable for i in t.items),
                      "unanswerable": sum(not i.answerable for i in t.items)} for t in tasks],
        "backend": ", ".join(backends) or (config.llm or "auto"), "llm_option": config.llm,
        "judge": judge.name if judge is not None else None, "lenient_method": lenient,
        "judge_failures": len(judge.failures) if judge is not None else 0,
        "settings_overrides": list(config.sets), "notes": list(notes),
    }


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


# --------------------------------------------------------------------------------------------
# Markdown


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def count(k: int, n: int) -> str:
    return f"{k}/{n}" if n else "–"


def seconds(value: float | None) -> str:
    return "–" if value is None else (f"{value:.2f}s" if value < 10 else f"{value:.1f}s")


def tokens(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 1e6:
        return f"{value / 1e6:.2f}M"
    if value >= 1e4:
        return f"{value / 1e3:.0f}K"
    return f"{value:,.0f}"


def render_markdown(report: dict[str, Any]) -> str:
    meta = report["meta"]
    lines = ["# PAGE-RAG evaluation", ""]
    lines += _header(meta)
    lines += ["", "## Main results (paper Table 1 layout)", "",
              "| Dataset | System | Strict | Lenient | Ref. | Lat. | QTok | BTok |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    datasets = [d["name"] for d in meta["datasets"]]
    for dataset in datasets:
        for r in (x for x in report["results"] if x["dataset"] == dataset):
            lines.append(f"| {dataset} | {display_name(r['pipeline'])} | {pct(r['strict_acc'])} | {pct(r['lenient_acc'])} | "
                         f"{count(r['correct_refusals'], r['unanswerable'])} | {seconds(r['latency_median_s'])} | "
                         f"{tokens(r['qtok'])} | {tokens(r['btok'])} |")
    scope = "both datasets together" if len(datasets) == 2 else ("all datasets together" if len(datasets) > 2 else datasets[0] if datasets else "")
    lines += ["", f"## Ablations (paper Table 3 layout; {scope})", "",
              "| Variant | Lenient Acc. | Ref. | BBS |", "| --- | --- | --- | --- |"]
    for r in (x for x in report["results"] if x["dataset"] == ALL):
        lines.append(f"| {display_name(r['pipeline'])} | {pct(r['lenient_acc'])} | "
                     f"{count(r['correct_refusals'], r['unanswerable'])} | {pct(r['bbs'])} |")
    lines += ["", "## Boundary, evidence and cost detail", "",
              "| Dataset | System | n | False ref. | Answered unanswerable | BBS | Evidence recall | Lat. p95 | Evidence budget | Escalated | Refusals by reason | Errors |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in report["results"]:
        if r["dataset"] == ALL and len(datasets) < 2:  # one dataset: "all" repeats it
            continue
        lines.append(f"| {r['dataset']} | {display_name(r['pipeline'])} | {r['n']} | {count(r['false_refusals'], r['answerable'])} | "
                     f"{count(r['answered_unanswerable'], r['unanswerable'])} | {pct(r['bbs'])} | {pct(r['evidence_recall'])} | "
                     f"{seconds(r['latency_p95_s'])} | {tokens(r['evidence_budget'])} | {r['escalated']} | "
                     f"{_reasons(r.get('refusal_reasons') or {})} | {r['errors']} |")
    lines += ["", "## Per question type (all datasets)", "",
              "| System | Type | n | Strict | Lenient | Ref. | False ref. | Evidence recall | Lat. | QTok |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in report["by_type"]:
        lines.append(f"| {display_name(r['pipeline'])} | {r['type']} | {r['n']} | {pct(r['strict_acc'])} | {pct(r['lenient_acc'])} | "
                     f"{count(r['correct_refusals'], r['unanswerable'])} | {count(r['false_refusals'], r['answerable'])} | "
                     f"{pct(r['evidence_recall'])} | {seconds(r['latency_median_s'])} | {tokens(r['qtok'])} |")
    lines += ["", _legend()]
    if meta.get("plots"):
        lines += ["", "## Plots", ""] + [f"![{Path(p).stem}]({Path(p).name})" for p in meta["plots"]]
    return "\n".join(lines) + "\n"


REASON_WORDS = {"low_retrieval_confidence": "RCS gate", "insufficient_evidence": "judge", "unsupported_answer": "unsupported"}


def _reasons(counts: dict[str, int]) -> str:
    return " · ".join(f"{REASON_WORDS.get(k, k)} {v}" for k, v in counts.items()) or "–"


def _header(meta: dict[str, Any]) -> list[str]:
    if meta["complete"]:
        status = f"complete ({meta['done']} of {meta['planned']} question runs)"
    else:
        status = (f"**PARTIAL**: {meta['done']} of {meta['planned']} question runs; continue with the same command "
                  "and `--resume`")
    out = [f"- Status: {status}; written {meta['written']}"]
    for d in meta["datasets"]:
        out.append(f"- Dataset {d['name']}: {d['questions']} questions ({d['answerable']} answerable, "
                   f"{d['unanswerable']} unanswerable), repository `{d['repo']}`")
    out.append(f"- Pipelines: {', '.join(meta['pipelines'])}; answer backend: {meta['backend']}")
    out.append(f"- Lenient accuracy: {meta['lenient_method']}")
    if meta.get("judge_failures"):
        out.append(f"- Judge replies unusable for {meta['judge_failures']} answers (token recall used for those)")
    if meta.get("settings_overrides"):
        out.append(f"- Settings overrides: {', '.join(meta['settings_overrides'])}")
    out += [f"- Note: {note}" for note in meta.get("notes", [])]
    return out


def _legend() -> str:
    return ("Strict/Lenient: accuracy (%) on answerable questions (a refusal there counts as wrong). Ref.: correct "
            "refusals / unanswerable questions. Lat.: median wall time of one question. QTok: LLM prompt tokens per "
            "question, all stages (0 with the extractive backend). BTok: LLM tokens of the repository build (0 for "
            "passages-only, which needs no graph). BBS = 2·Lenient·Ref/(Lenient+Ref). Evidence recall: share of the "
            "gold quotes found inside the cited spans (verbatim quote sets only; refusals cite nothing). "
            "Evidence budget: mean evidence token budget of the route (after any widening).")
