"""Accuracy-coverage curves as a PNG (matplotlib, Agg backend: no display needed)."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

DEFAULT_METHODS = ("rcs", "mlp", "rcs-paper", "query-len-inv", "lift", "entropy", "max-score", "random", "oracle")


def plot_accuracy_coverage(curves: Mapping[str, Sequence[Sequence[float]]], path: str | Path,
                           title: str = "Accuracy vs coverage", base_accuracy: float | None = None,
                           methods: Sequence[str] = DEFAULT_METHODS) -> Path:
    """curves: {method: [coverages, accuracies]} (as in run_rcs_eval()["curves"]); writes `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4), dpi=120)
    for name in [m for m in methods if m in curves] or list(curves):
        cov, acc = curves[name]
        style = {"linewidth": 2.4} if name == "rcs" else {"linewidth": 1.2}
        if name in ("random", "oracle"):
            style.update(linestyle=":", color="grey" if name == "random" else "black")
        ax.plot(cov, acc, label=name, **style)
    if base_accuracy is not None:
        ax.axhline(base_accuracy, color="grey", linestyle="--", linewidth=0.8, label="answer all")
    ax.set(xlabel="coverage (share of questions answered)", ylabel="accuracy (all gold retrieved)",
           title=title, xlim=(0, 1), ylim=(0, 1.02))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
