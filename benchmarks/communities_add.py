"""The community stage of one add, incremental (the default) against a full recompute.

    nice -n 10 python benchmarks/communities_add.py --repo LIB --doc DOC --work DIR [--runs 2]

Each run copies LIB twice into DIR and adds DOC to each with `pagerag add` (a new process each):
once with the defaults (community.incremental = true), once with --set community.incremental=false.
Per add it prints the manifest's stage_seconds `communities` (Leiden, summaries and their content
keys, for the raw and governed graphs) and `leiden` (of which Leiden, with the base's partition
read on the incremental path), the entities re-clustered per graph and the summaries reused; for
the last run, the modularity (networkx, level-0 communities, weighted) of both results on the same graphs and the
adjusted mutual information of the base's entities' level-0 communities before and after, and how
many communities are the base's (same id, level, parent and members).
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path


def add(lib: Path, doc: Path, target: Path, incremental: bool) -> dict:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(lib, target)
    command = [sys.executable, "-m", "pagerag.cli", "add", str(doc), "--repo", str(target), "-q"]
    if not incremental:
        command += ["--set", "community.incremental=false"]
    t0 = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    manifest = json.loads((target / "manifest.json").read_text())
    stages = manifest["stage_seconds"]
    return {"incremental": incremental, "add_s": round(time.perf_counter() - t0, 1),
            "communities_s": stages.get("communities"), "leiden_s": stages.get("leiden"),
            "reclustered": manifest.get("governance", {}).get("communities_reclustered"),
            "summaries_reused": manifest.get("governance", {}).get("summaries_reused")}


def quality(lib: Path, incremental: Path, full: Path) -> dict:
    import networkx as nx
    from sklearn.metrics import adjusted_mutual_info_score

    from pagerag.graph.communities import edge_weights
    from pagerag.repository import Repository

    out = {}
    base, inc, rec = Repository.open(lib), Repository.open(incremental), Repository.open(full)
    for kind in ("governed", "raw"):
        graph = inc.graph(kind)
        g = nx.Graph()
        g.add_nodes_from(e.entity_id for e in graph.entities)
        nodes = set(g.nodes)
        g.add_weighted_edges_from((a, b, w) for (a, b), w in edge_weights(
            ((r.source, r.target, r.weight) for r in graph.relations), nodes).items())

        def level0(repo):
            return {m: c.community_id for c in repo.graph(kind).communities if c.level == 0 for m in c.entity_ids}

        def modularity(repo):
            groups: dict[str, set] = {}
            for m, c in level0(repo).items():
                groups.setdefault(c, set()).add(m)
            return round(nx.community.modularity(g, list(groups.values())), 4)

        def same(repo):  # communities identical to one of the base's: id, level, parent, members
            old = {(c.community_id, c.level, c.parent, tuple(c.entity_ids)) for c in base.graph(kind).communities}
            return sum((c.community_id, c.level, c.parent, tuple(c.entity_ids)) in old for c in repo.graph(kind).communities)

        before, after_inc, after_full = level0(base), level0(inc), level0(rec)
        old = sorted(set(before) & set(after_inc))
        out[kind] = {"modularity_incremental": modularity(inc), "modularity_full": modularity(rec),
                     "ami_base_vs_incremental": round(adjusted_mutual_info_score([before[n] for n in old], [after_inc[n] for n in old]), 4),
                     "ami_base_vs_full": round(adjusted_mutual_info_score([before[n] for n in old], [after_full[n] for n in old]), 4),
                     "kept_incremental": [same(inc), len(inc.graph(kind).communities)],
                     "kept_full": [same(rec), len(rec.graph(kind).communities)]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--doc", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    for _ in range(args.runs):
        for incremental in (True, False):
            target = args.work / ("incremental.rag" if incremental else "full.rag")
            print(json.dumps(add(args.repo, args.doc, target, incremental)), flush=True)
    print(json.dumps(quality(args.repo, args.work / "incremental.rag", args.work / "full.rag")))


if __name__ == "__main__":
    main()
