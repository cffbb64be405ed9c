"""Aggregate scored result rows (results.jsonl lines) into the report's figures.

Accuracies are over answerable questions (a refusal there is a false refusal and counts as
wrong); correct refusal is over unanswerable ones; BBS = 2·Acc_lenient·Ref/(Acc_lenient+Ref),
undefined (None) unless both kinds of question are present. Latency is the wall time of one
`ask` (seconds); QTok is the LLM prompt tokens of one question, all stages; BTok is the LLM
tokens the repository's build spent (0 for a pipeline that reads no graph: it needs none).
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any, Iterable

ALL = "all"


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100) of `values`; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def bbs(lenient: float | None, refusal: float | None) -> float | None:
    if lenient is None or refusal is None:
        return None
    return 0.0 if lenient + refusal == 0 else 2 * lenient * refusal / (lenient + refusal)


def summarise(rows: Iterable[dict[str, Any]], build_tokens: int | None = None) -> dict[str, Any]:
    rows = list(rows)
    answerable = [r for r in rows if r["answerable"]]
    unanswerable = [r for r in rows if not r["answerable"]]
    n_a, n_u = len(answerable), len(unanswerable)
    strict = sum(r["score"]["strict"] for r in answerable)
    lenient = sum(r["score"]["lenient"] for r in answerable)
    refused_right = sum(bool(r["score"]["correct_refusal"]) for r in unanswerable)
    refused_wrong = sum(bool(r["score"]["false_refusal"]) for r in answerable)
    lenient_rate = lenient / n_a if n_a else None
    refusal_rate = refused_right / n_u if n_u else None
    recalls = [r["score"]["evidence_recall"] for r in answerable if r["score"].get("evidence_recall") is not None]
    latencies = [r["latency_s"] for r in rows if r.get("latency_s") is not None]
    return {
        "n": len(rows), "answerable": n_a, "unanswerable": n_u,
        "strict": strict, "lenient": lenient,
        "strict_acc": strict / n_a if n_a else None, "lenient_acc": lenient_rate,
        "correct_refusals": refused_right, "refusal_rate": refusal_rate,
        "false_refusals": refused_wrong, "false_refusal_rate": refused_wrong / n_a if n_a else None,
        "answered_unanswerable": n_u - refused_right,
        "bbs": bbs(lenient_rate, refusal_rate),
        "evidence_recall": statistics.fmean(recalls) if recalls else None, "evidence_recall_n": len(recalls),
        "latency_median_s": percentile(latencies, 50), "latency_p95_s": percentile(latencies, 95),
        "qtok": statistics.fmean(r["prompt_tokens"] for r in rows) if rows else None,
        "completion_tokens": statistics.fmean(r["completion_tokens"] for r in rows) if rows else None,
        "evidence_budget": statistics.fmean(r.get("budget_tokens") or 0 for r in rows) if rows else None,
        "btok": build_tokens,
        "escalated": sum(bool(r.get("escalated")) for r in rows),
        "refusal_reasons": dict(sorted(Counter(r.get("reason") or "?" for r in rows if r.get("decision") == "refused").items())),
        "errors": sum(bool(r.get("error")) for r in rows),
        "lenient_methods": sorted({r["score"]["lenient_method"] for r in answerable if r["score"].get("lenient_method")}),
    }


def summarise_run(rows: list[dict[str, Any]], pipelines: list[str], datasets: list[str],
                  build_tokens: dict[tuple[str, str], int]) -> dict[str, Any]:
    """Per pipeline: per dataset and over all datasets; per pipeline and question type.
    `build_tokens[(pipeline, dataset)]` is that dataset's BTok for that pipeline."""
    results, by_type = [], []
    for pipeline in pipelines:
        mine = [r for r in rows if r["pipeline"] == pipeline]
        for dataset in datasets:
            subset = [r for r in mine if r["dataset"] == dataset]
            results.append({"pipeline": pipeline, "dataset": dataset,
                            **summarise(subset, build_tokens.get((pipeline, dataset)))})
        total = sum(build_tokens.get((pipeline, d)) or 0 for d in datasets)
        results.append({"pipeline": pipeline, "dataset": ALL, **summarise(mine, total)})
        for kind in _types_in_order(mine):
            by_type.append({"pipeline": pipeline, "type": kind, **summarise(r for r in mine if r["type"] == kind)})
    return {"results": results, "by_type": by_type}


def _types_in_order(rows: list[dict[str, Any]]) -> list[str]:
    """Answerable types first (in order of appearance), unanswerable last."""
    answerable = list(dict.fromkeys(r["type"] for r in rows if r["answerable"]))
    other = [t for t in dict.fromkeys(r["type"] for r in rows if not r["answerable"]) if t not in answerable]
    return answerable + other


def find(summary: dict[str, Any], pipeline: str, dataset: str = ALL) -> dict[str, Any] | None:
    return next((r for r in summary["results"] if r["pipeline"] == pipeline and r["dataset"] == dataset), None)
