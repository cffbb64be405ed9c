"""Rich tables for `pagerag rcs-eval` and benchmarks/rcs.py (the paper's Tables 1-4)."""
from __future__ import annotations

from typing import Mapping, Sequence

TABLE1_ORDER = ("random", "entropy", "max-score", "margin", "lift", "query-len-inv", "temp-scaled",
                "mlp-paper", "mlp", "rcs-paper", "rcs", "oracle")


def _ci(row: Mapping) -> str:
    return f"{row['auc_ac']:.3f} [{row['ci'][0]:.3f}, {row['ci'][1]:.3f}]"


def _diff(row: Mapping) -> str:
    d = row.get("rcs_minus")
    if not d:
        return ""
    mark = " *" if d["ci"][0] > 0 else ""
    return f"{d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]{mark}"


def table1(results: Mapping[str, Mapping]):
    """AUC-AC with 95% CI per method (rows) and data set (columns); RCS minus method, paired."""
    from rich.table import Table

    t = Table(title="Table 1: AUC-AC on the test half [95% bootstrap CI]; RCS − method, paired CI (* = CI above 0)")
    t.add_column("method")
    for name in results:
        t.add_column(name, justify="right")
        t.add_column("RCS − method", justify="right")
    t.add_row("base CWAR", *[x for r in results.values() for x in (f"{r['base_cwar']:.1%}", "")])
    for method in TABLE1_ORDER:
        cells = []
        for r in results.values():
            row = r["methods"].get(method)
            cells += [_ci(row) if row else "", _diff(row) if row else ""]
        t.add_row(method, *cells, style="bold" if method == "rcs" else None)
    t.add_row("RCS normalised gain", *[x for r in results.values()
                                       for x in (f"{r['methods']['rcs']['gain']:.2f}", "")])
    spreads = [f"{name} {min(r['mlp_auc_ac_by_seed']):.3f}–{max(r['mlp_auc_ac_by_seed']):.3f}"
               for name, r in results.items() if r.get("mlp_auc_ac_by_seed")]
    if spreads:
        t.caption = "mlp = MLP(32,32) on the RCS features, seed 0; AUC-AC over seeds 0–4: " + ", ".join(spreads)
    return t


def table2(results: Mapping[str, Mapping], methods: Sequence[str] = ("rcs", "mlp", "rcs-paper", "query-len-inv", "lift", "entropy")):
    from rich.table import Table

    t = Table(title="Table 2: operating points on the test half (accuracy / CWAR / Δaccuracy vs answering all)")
    t.add_column("method")
    t.add_column("coverage")
    for name in results:
        t.add_column(name, justify="right")
    for method in methods:
        for cov in ("70%", "50%"):
            cells = []
            for r in results.values():
                op = r["operating_points"].get(method, {}).get(cov)
                cells.append(f"{op['accuracy']:.1%} / {op['cwar']:.1%} / {op['delta_accuracy'] * 100:+.1f}pp" if op else "")
            t.add_row(method, cov, *cells)
    for r_name, r in results.items():
        th = r["threshold"]
        t.caption = (t.caption or "") + (f"{r_name}: τ={th['tau']:.3f} for target CWAR {th['target_cwar']:.0%} on tune → "
                                         f"test CWAR {th['test_cwar']:.1%} at coverage {th['test_coverage']:.1%}.  ")
    return t


def _per_dataset(title: str, first: str, results: Mapping[str, Mapping]):
    """A rich table with a label column and one right-aligned column per data set."""
    from rich.table import Table

    t = Table(title=title)
    t.add_column(first)
    for name in results:
        t.add_column(name, justify="right")
    return t


def table3(results: Mapping[str, Mapping]):
    t = _per_dataset("Table 3: calibration on the test half (ECE: 10 equal-frequency bins)", "", results)
    rows = [("RCS ECE", lambda r: r["ece"]["rcs"]),
            ("ECE of a perfectly calibrated score (sampling noise)", lambda r: r["ece_noise_floor"]),
            ("RCS-paper ECE", lambda r: r["ece"]["rcs-paper"]), ("MLP ECE", lambda r: r["ece"]["mlp"]),
            ("RCS Brier", lambda r: r["brier"]["rcs"]), ("RCS-paper Brier", lambda r: r["brier"]["rcs-paper"]),
            ("MLP Brier", lambda r: r["brier"]["mlp"]),
            ("constant (tune base rate) Brier", lambda r: r["brier"]["constant"])]
    for label, get in rows:
        t.add_row(label, *[f"{get(r):.3f}" for r in results.values()])
    return t


def table4(results: Mapping[str, Mapping]):
    t = _per_dataset("Table 4: leave-one-out ablation, ΔAUC-AC on the test half (negative = the feature helps)",
                     "feature removed", results)
    first = next(iter(results.values()))
    t.add_row("none (full model)", *[f"{r['ablation']['full']:.3f}" for r in results.values()])
    for feat in first["ablation"]["delta"]:
        t.add_row(feat, *[f"{r['ablation']['delta'].get(feat, float('nan')):+.4f}" for r in results.values()])
    return t


def transfer_table(results: Mapping[str, Mapping]):
    from rich.table import Table

    t = Table(title="Cross-data-set transfer: RCS fitted on another set's tune half, tested here")
    for col in ("test set", "trained on", "AUC-AC [CI]", "in-domain", "Δ", "ECE"):
        t.add_column(col, justify="right")
    for name, r in results.items():
        tr = r.get("transfer")
        if tr:
            t.add_row(name, tr["train"], f"{tr['auc_ac']:.3f} [{tr['ci'][0]:.3f}, {tr['ci'][1]:.3f}]",
                      f"{tr['in_domain_auc_ac']:.3f}", f"{tr['delta']:+.3f}", f"{tr['ece']:.3f}")
    return t


def print_report(results: Mapping[str, Mapping], console=None) -> None:
    """All tables for one or several data sets (columns side by side)."""
    from rich.console import Console

    console = console or Console()
    for make in (table1, table2, table3, table4):
        console.print(make(results))
    if any(r.get("transfer") for r in results.values()):
        console.print(transfer_table(results))
