"""What each group of the sufficiency model's features is worth: the held-out AUC of P(sufficient)
with the group left out, on the 15 training books.

    python benchmarks/decision_ablations.py --features F --reads F/reader [--json ablations.json]

F and F/reader are the feature tables and the reader's held-out scores the shipped decision was
fitted on (`python -m pagerag.train.features`, `python -m pagerag.train.reader_scores`;
docs/decision.md). The configuration is the packaged model's own (its RCS features and priors, the
prior and weighting `python -m pagerag.train.fit --write` chose on all 15 books:
pagerag/generate/models/sufficiency.json, training.config); each group is then dropped from its
sufficiency features and the stack fitted again (pagerag.train.stack, the same inner folds), so
each figure is held out by book. A measurement only: nothing here is written into the package.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Feature groups whose worth is measured by leaving them out (held-out AUC of P(sufficient)).
ABLATIONS = {
    "reader (read_*)": ("read_top", "read_second", "read_margin", "read_best_margin", "read_mass", "read_count"),
    "reader span (read_margin, read_best_margin)": ("read_margin", "read_best_margin"),
    "rcs": ("rcs",),
    "lexical and dense (max_dense, max_lex, names_evidence, attr_span)": ("max_dense", "max_lex", "names_evidence",
                                                                          "attr_span"),
    "graph (graph_paths, best_path, community_match, graph_only_share)": ("graph_paths", "best_path", "community_match",
                                                                          "graph_only_share"),
}


def ablations(examples, cfg) -> dict:
    """Held-out AUC of P(sufficient) with every feature (`none`) and with each group left out."""
    from pagerag.train.fit import suff_auc
    from pagerag.train.stack import Stack

    out = {"none": suff_auc(examples, Stack.fit(examples, cfg).held_out)}
    for name, drop in ABLATIONS.items():
        trial = replace(cfg, sufficiency_features=[f for f in cfg.sufficiency_features if f not in drop])
        out[name] = suff_auc(examples, Stack.fit(examples, trial).held_out)
    return out


def packaged_config():
    """The Config the packaged sufficiency model was fitted with."""
    from pagerag.generate.models import SUFFICIENCY, packaged
    from pagerag.train.stack import Config

    return Config(**packaged(SUFFICIENCY).training["config"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/decision_ablations.py", description=__doc__.split("\n")[0])
    ap.add_argument("--features", required=True, type=Path, help="Feature tables (python -m pagerag.train.features).")
    ap.add_argument("--reads", required=True, type=Path,
                    help="The reader's held-out scores on them (python -m pagerag.train.reader_scores).")
    ap.add_argument("--json", type=Path, default=None, help="Also write the figures here.")
    args = ap.parse_args(argv)
    from pagerag.train.books import TRAIN_BOOKS
    from pagerag.train.features import read_tables
    from pagerag.train.reader_scores import read_scores
    from pagerag.train.stack import load_examples

    books = list(TRAIN_BOOKS)
    examples = load_examples(read_tables(args.features, books), read_scores(args.reads, books))  # test books never read
    result = ablations(examples, packaged_config())
    print("| left out | held-out AUC of P(sufficient) |\n| --- | ---: |")
    for name, auc in result.items():
        print(f"| {name} | {auc:.4f} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
