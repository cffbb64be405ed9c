"""RCS benchmark: the paper's Tables 1-4 for the three multi-hop sets side by side, transfer,
and the packaged default model on each test half.

    python benchmarks/rcs.py                       # all tables (about 6 min on 2 cores, warm cache)
    python benchmarks/rcs.py --json rcs.json --plot-dir plots/
    python benchmarks/rcs.py --select              # re-run the feature elimination (tune halves only)
    python benchmarks/rcs.py --write-default       # refit pagerag/confidence/default_rcs.json

Data: $PAGERAG_DATA_DIR/multihop (default ../shared/data/multihop beside the checkout). Corpus
embeddings are cached under $PAGERAG_CACHE_DIR/rcs (default ~/.cache/pagerag/rcs) by sha256.
Transfer: 2Wiki is tested with a model fitted on MuSiQue's tune half (as in the paper); MuSiQue
and HotpotQA with one fitted on 2Wiki's.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SETS = {"2wiki": "2wikimultihopqa_1000", "musique": "musique_300", "hotpotqa": "hotpotqa_400"}
TRANSFER_FROM = {"2wiki": "musique", "musique": "2wiki", "hotpotqa": "2wiki"}


def data_dir() -> Path:
    configured = os.environ.get("PAGERAG_DATA_DIR")
    path = Path(configured) if configured else ROOT.parent / "shared" / "data"
    if not (path / "multihop").is_dir():
        sys.exit(f"multi-hop data not found under {path}; set PAGERAG_DATA_DIR")
    return path / "multihop"


def paths(base: Path, key: str) -> tuple[Path, Path]:
    return base / f"{SETS[key]}.queries.jsonl", base / f"{SETS[key]}.corpus.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, help="write all results here")
    ap.add_argument("--plot-dir", type=Path, help="write one accuracy-coverage PNG per set here")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--select", action="store_true", help="print the leave-one-out feature elimination")
    ap.add_argument("--write-default", action="store_true", help="refit and write the packaged default model")
    args = ap.parse_args()

    from rich.console import Console

    from pagerag.evaluate.rcs import run as R
    from pagerag.confidence.features import PAPER_FEATURES
    from pagerag.confidence.model import DEFAULT_MODEL_PATH, PAPER_MODEL_PATH, RCSModel
    from pagerag.evaluate.rcs.report import print_report

    console = Console()
    base = data_dir()
    say = lambda msg: console.print(f"[dim]{msg}[/dim]")  # noqa: E731
    start = time.perf_counter()
    prepared = {k: R.prepare_dataset(*paths(base, k), progress=say) for k in SETS}
    say(f"features for all sets: {time.perf_counter() - start:.0f} s")

    if args.select:
        run_selection(prepared, console)
        return
    if args.write_default:
        for path, names in ((DEFAULT_MODEL_PATH, R.RCS_FEATURES), (PAPER_MODEL_PATH, PAPER_FEATURES)):
            model = R.fit_default_model(list(prepared.values()), names)
            model.save(path)
            console.print(f"wrote {path} (tau {model.tau:.3f}, {len(model.feature_names)} features)")

    results = {}
    for key in SETS:
        source = paths(base, TRANSFER_FROM[key])
        results[key] = R.run_rcs_eval(*paths(base, key), *source, n_boot=args.bootstrap)
    print_report(results, console)
    for path in (DEFAULT_MODEL_PATH, PAPER_MODEL_PATH):
        if path.is_file():
            packaged = RCSModel.load(path)
            print_default(path.name, packaged, {k: R.evaluate_model_on_test(packaged, prepared[k], args.bootstrap)
                                                for k in SETS}, console)
    if args.plot_dir:
        from pagerag.evaluate.rcs.plot import plot_accuracy_coverage

        for key, r in results.items():
            plot_accuracy_coverage(r["curves"], args.plot_dir / f"rcs-{key}.png", title=f"{key}: accuracy vs coverage",
                                   base_accuracy=1 - r["base_cwar"])
    if args.json:
        args.json.write_text(json.dumps({k: {kk: vv for kk, vv in r.items() if kk != "curves"}
                                         for k, r in results.items()}, indent=1) + "\n")
    say(f"total {time.perf_counter() - start:.0f} s")


def print_default(name: str, model, rows: dict, console) -> None:
    from rich.table import Table

    t = Table(title=f"Packaged {name} ({len(model.feature_names)} features, fitted on the pooled tune halves) "
                    "on each test half")
    for col in ("set", "AUC-AC [CI]", "norm. gain", "ECE", "Brier", f"test CWAR / coverage at τ={model.tau:.3f}"):
        t.add_column(col, justify="right")
    for key, r in rows.items():
        t.add_row(key, f"{r['auc_ac']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]", f"{r['gain']:.2f}",
                  f"{r['ece']:.3f}", f"{r['brier']:.3f}", f"{r['tau_test_cwar']:.1%} / {r['tau_test_coverage']:.1%}")
    console.print(t)


def run_selection(prepared: dict, console) -> None:
    """Leave-one-out elimination of the candidate extras on the tune halves (test halves unseen)."""
    from pagerag.confidence.features import PAPER_FEATURES
    from pagerag.confidence.model import DEFAULT_PRIOR
    from pagerag.evaluate.rcs.selection import PRIOR_GRID, backward_eliminate, criterion

    datasets = [({k: v[d["tune"]] for k, v in d["table"].items()}, d["labels"][d["tune"]]) for d in prepared.values()]
    extras = [n for n in datasets[0][0] if n not in PAPER_FEATURES]
    for prior in PRIOR_GRID:
        console.print(f"prior {prior:>4}: paper features {criterion(datasets, list(PAPER_FEATURES), prior):.4f}, "
                      f"paper + all {len(extras)} extras {criterion(datasets, [*PAPER_FEATURES, *extras], prior):.4f} "
                      "(mean out-of-fold normalised gain)")
    kept, _ = backward_eliminate(datasets, list(PAPER_FEATURES), extras, DEFAULT_PRIOR, log=console.print)
    console.print(f"kept: {kept}")


if __name__ == "__main__":
    main()
