"""PNG plots of a report (matplotlib, Agg backend: no display needed).

quality_vs_tokens.png   the paper's Figure 2 frontier: per pipeline, quality (BBS: lenient
                        accuracy and correct refusal together; lenient accuracy when a set has
                        no unanswerable questions) against query tokens per question. With the
                        extractive backend no prompt is sent, so the x axis is then the evidence
                        token budget of the route, and the axis label says so.
refusal_vs_accuracy.png correct-refusal rate against lenient accuracy, with BBS iso-lines.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .summary import ALL

MARKERS = "osD^vP*X"


def write_plots(out: Path, report: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    return [str(quality_vs_tokens(out / "quality_vs_tokens.png", report)),
            str(refusal_vs_accuracy(out / "refusal_vs_accuracy.png", report))]


def _points(report: dict[str, Any]) -> tuple[list[dict[str, Any]], str, str]:
    rows = [r for r in report["results"] if r["n"]]
    uses_prompts = any((r["qtok"] or 0) > 0 for r in rows)
    x_key = "qtok" if uses_prompts else "latency_median_s"
    x_label = "query tokens per question (LLM prompt)" if uses_prompts else \
        "median latency per question (s; no LLM prompt tokens were spent)"
    return rows, x_key, x_label


def _quality(row: dict[str, Any]) -> float | None:
    return row["bbs"] if row["bbs"] is not None else row["lenient_acc"]


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points no other point beats on both cost (lower x) and quality (higher y), by x."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or y > front[-1][1]:
            front.append((x, y))
    return front


def quality_vs_tokens(path: Path, report: dict[str, Any]) -> Path:
    import matplotlib.pyplot as plt

    rows, x_key, x_label = _points(report)
    pipelines = report["meta"]["pipelines"]
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    overall = [r for r in rows if r["dataset"] == ALL]
    for index, dataset in enumerate(datasets):
        subset = [r for r in rows if r["dataset"] == dataset and _quality(r) is not None]
        if not subset or (dataset == ALL and len(datasets) == 2):  # one dataset: "all" repeats it
            continue
        for r in subset:
            color = f"C{pipelines.index(r['pipeline']) % 10}" if r["pipeline"] in pipelines else "k"
            ax.scatter(r[x_key] or 0, 100 * _quality(r), marker=MARKERS[index % len(MARKERS)], color=color, s=60,
                       label=f"{r['pipeline']} · {dataset}")
    front = pareto_front([(r[x_key] or 0, 100 * _quality(r)) for r in overall if _quality(r) is not None])
    if len(front) > 1:
        ax.plot([p[0] for p in front], [p[1] for p in front], "k--", lw=1, label="frontier (all datasets)")
    ax.set_xlabel(x_label)
    ax.set_ylabel("quality: BBS (%)")
    ax.set_title("Quality vs query cost per pipeline")
    return _finish(plt, fig, ax, path)


def refusal_vs_accuracy(path: Path, report: dict[str, Any]) -> Path:
    import matplotlib.pyplot as plt
    import numpy as np

    rows = [r for r in report["results"] if r["n"] and r["lenient_acc"] is not None and r["refusal_rate"] is not None]
    pipelines = report["meta"]["pipelines"]
    fig, ax = plt.subplots(figsize=(8.5, 5), dpi=110)
    acc = np.linspace(0.01, 1.0, 200)
    for level in (0.5, 0.7, 0.9):
        with np.errstate(divide="ignore", invalid="ignore"):
            ref = level * acc / (2 * acc - level)
        keep = (2 * acc > level) & (ref <= 1.0) & (ref >= 0)
        ax.plot(100 * acc[keep], 100 * ref[keep], color="0.75", lw=0.8, ls=":")
        if keep.any():
            ax.annotate(f"BBS {level:.1f}", (100 * acc[keep][-1], 100 * ref[keep][-1]), fontsize=7, color="0.5")
    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    for index, dataset in enumerate(datasets):
        if dataset == ALL and len(datasets) == 2:  # one dataset: "all" repeats it
            continue
        for r in (x for x in rows if x["dataset"] == dataset):
            color = f"C{pipelines.index(r['pipeline']) % 10}" if r["pipeline"] in pipelines else "k"
            ax.scatter(100 * r["lenient_acc"], 100 * r["refusal_rate"], marker=MARKERS[index % len(MARKERS)],
                       color=color, s=60 if dataset == ALL else 30, label=f"{r['pipeline']} · {dataset}")
    ax.set_xlim(0, 102)
    ax.set_ylim(0, 102)
    ax.set_xlabel("lenient accuracy on answerable questions (%)")
    ax.set_ylabel("correct refusal on unanswerable questions (%)")
    ax.set_title("Refusal vs accuracy")
    return _finish(plt, fig, ax, path)


def _finish(plt, fig, ax, path: Path) -> Path:
    """Grid, the legend beside the axes, save and close."""
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
