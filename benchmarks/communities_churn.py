"""What an add does to a library's communities: from two published versions.

    python benchmarks/communities_churn.py OLD_VERSION_DIR NEW_REPO [--kind governed|raw] [--recluster-share X]
    python benchmarks/communities_churn.py --stability REPO [--kind governed|raw]

OLD_VERSION_DIR: the version before the add (a library keeps it in `.<name>.versions/<number>`).
On NEW_REPO's graph, from OLD's communities: `update_communities` (community_update.py) timed,
how many entities it placed, how many communities come out as they were (same id, level and
members), the summaries' content keys and the new summaries (those whose key OLD did not have)
timed, and the modularity of the level-0 partition against a full recompute's
(`detect_communities`) on the same graph (docs/library.md, "~1,000 documents").

--stability: why an add no longer runs Leiden again from the previous partition. For REPO's
three largest level-0 communities, graspologic-native's `leiden` on the community's own edges,
started from its level-1 children, and then started from its own result: how many of the
communities it returns are ones it started from.
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
    ap.add_argument("new", type=Path, nargs="?")
    ap.add_argument("--kind", default="governed", choices=["governed", "raw"])
    ap.add_argument("--recluster-share", type=float, help="community.recluster_share (default: the setting's)")
    ap.add_argument("--stability", action="store_true")
    args = ap.parse_args()
    settings = load_settings(environ={}).community
    if args.stability:
        return stability(Repository.open(args.old), args.kind, settings)
    if args.recluster_share is not None:
        settings = settings.model_copy(update={"recluster_share": args.recluster_share})
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


def stability(repo, kind: str, settings) -> int:
    import graspologic_native as gn
    import networkx as nx

    from pagerag.library import previous_communities

    communities = previous_communities(repo, kind)
    graph = repo.graph(kind)
    edges = {}
    from pagerag.graph.communities import weighted_edges

    for a, b, w in weighted_edges(graph):
        edges[(a, b)] = w
    for top in sorted((c for c in communities if c.level == 0), key=lambda c: -len(c.entity_ids))[:3]:
        inside = set(top.entity_ids)
        children = [c for c in communities if c.parent == top.community_id]
        own = sorted((a, b, w) for (a, b), w in edges.items() if a in inside and b in inside)
        nodes = list(dict.fromkeys(n for a, b, _ in own for n in (a, b)))
        whole = nx.Graph()
        whole.add_weighted_edges_from(own)

        def run(start_groups):
            # graspologic-native's leiden panics on a starting community that is not connected: its connected parts
            parts = [part for members in start_groups
                     for part in nx.connected_components(whole.subgraph(set(members) & set(nodes)))]
            where = {n: i for i, members in enumerate(parts) for n in members}
            numbers: dict[int, int] = {}
            start = {n: numbers.setdefault(where[n], len(numbers)) for n in nodes}
            _, labels = gn.leiden(own, starting_communities=start, resolution=settings.resolution, seed=settings.seed,
                                  use_modularity=True, iterations=settings.iterations)
            out: dict[int, set] = {}
            for node, cluster in labels.items():
                out.setdefault(cluster, set()).add(node)
            return [frozenset(m) for m in out.values()]

        first = run([c.entity_ids for c in children])
        again = run(first)
        before = {frozenset(c.entity_ids) & frozenset(nodes) for c in children}
        print(f"{len(inside):,} entities, {len(children)} children: from them Leiden returns {len(first)} communities, "
              f"{sum(m in before for m in first)} of them as they were; from its own result, {len(again)}, "
              f"{sum(m in set(first) for m in again)} as they were")
    return 0


def modularity(graph, communities) -> float:
    import networkx as nx

    from pagerag.graph.communities import weighted_edges

    g = nx.Graph()
    g.add_nodes_from(e.entity_id for e in graph.entities)
    g.add_weighted_edges_from(weighted_edges(graph))
    return nx.community.modularity(g, [set(c.entity_ids) for c in communities if c.level == 0])


if __name__ == "__main__":
    sys.exit(main())
