"""What an add does to a library's communities: from two published versions.

    python benchmarks/communities_churn.py OLD_VERSION_DIR NEW_REPO [--kind governed|raw]

OLD_VERSION_DIR: the version before the add (a library keeps it in `.<name>.versions/<number>`).
On NEW_REPO's graph, from OLD's communities: `update_communities` (community_update.py) timed,
how many entities it placed, how many communities come out as they were (same id, level and
members), the summaries' content keys and the new summaries (those whose key OLD did not have)
timed, and the modularity of the level-0 partition against a full recompute's
(`detect_communities`) on the same graph (docs/library.md, "~1,000 documents").
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from pagerag.graph.communities import detect_communities
    from pagerag.graph.community_update import update_communities
    from pagerag.library import previous_communities
    from pagerag.repository import Repository
    from pagerag.settings import load_settings

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--kind", default="governed", choices=["governed", "raw"])
    args = ap.parse_args()
    settings = load_settings(environ={}).community
    old_repo, new_repo = Repository.open(args.old), Repository.open(args.new)
    before = previous_communities(old_repo, args.kind)
    graph = new_repo.graph(args.kind)
    started = time.perf_counter()
    communities, placed = update_communities(graph, settings, before)
    seconds = time.perf_counter() - started
    old = {(c.community_id, c.level, tuple(c.entity_ids)) for c in before}
    same = sum((c.community_id, c.level, tuple(c.entity_ids)) in old for c in communities)
    print(f"{args.kind}: {len(graph.entities):,} entities, {placed:,} placed; update_communities {seconds:.1f} s; "
          f"{same:,} of {len(communities):,} communities as they were")
    summaries_after(graph, communities, old_repo, new_repo, args.kind)
    started = time.perf_counter()
    full = detect_communities(graph, settings)
    print(f"modularity of level 0: placed {modularity(graph, communities):.4f}, full recompute "
          f"{modularity(graph, full):.4f} ({time.perf_counter() - started:.1f} s)")
    return 0


def summaries_after(graph, communities, old_repo, new_repo, kind: str) -> None:
    """Every community's content key, then summaries for those whose key the old version did not
    have (as library._summarised does)."""
    from pagerag.graph.summaries import summarise_communities, summary_inputs
    from pagerag.library import previous_summaries
    from pagerag.settings import load_settings
    from pagerag.stages import digest

    old = previous_summaries(old_repo)[kind]
    started = time.perf_counter()
    keys = [digest(k) for k in summary_inputs(graph, communities)]
    keyed = time.perf_counter() - started
    fresh = [c for c, k in zip(communities, keys) if k not in old]
    started = time.perf_counter()
    summarise_communities(graph, fresh, new_repo.passages, load_settings(environ={}).community)
    print(f"summary keys of all {len(communities):,} communities {keyed:.1f} s; summaries of the "
          f"{len(fresh):,} with a new key {time.perf_counter() - started:.1f} s")


def modularity(graph, communities) -> float:
    import networkx as nx

    from pagerag.graph.communities import weighted_edges

    g = nx.Graph()
    g.add_nodes_from(e.entity_id for e in graph.entities)
    g.add_weighted_edges_from(weighted_edges(graph))
    return nx.community.modularity(g, [set(c.entity_ids) for c in communities if c.level == 0])


if __name__ == "__main__":
    sys.exit(main())
