"""How much of a library's graph an add re-clusters, and why: from two published versions.

    python benchmarks/communities_region.py OLD_VERSION_DIR NEW_REPO [--kind governed|raw]
    python benchmarks/communities_region.py --stability REPO [--kind governed|raw]

OLD_VERSION_DIR: the version before the add (a library keeps it in `.<name>.versions/<number>`).
Prints the entities the add changed (new; through a new or vanished edge; through a weight alone),
the level-0 communities they fall in and the region `update_communities` re-clusters, the
largest level-0 communities, the time of `update_communities` itself with how many
communities come out unchanged, and the time of the summaries' keys and of the new summaries (docs/library.md, "~1,000 documents").
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from pagerag.graph.communities import changed_nodes, touched_region, update_communities, weighted_edges
    from pagerag.library import previous_partition
    from pagerag.repository import Repository
    from pagerag.settings import load_settings

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path, nargs="?")
    ap.add_argument("--kind", default="governed", choices=["governed", "raw"])
    ap.add_argument("--stability", action="store_true")
    args = ap.parse_args()
    if args.stability:
        return stability(Repository.open(args.old), args.kind, load_settings(environ={}).community)
    old_repo, new_repo = Repository.open(args.old), Repository.open(args.new)
    before = previous_partition(old_repo, args.kind)
    graph = new_repo.graph(args.kind)
    edges = {(a, b): w for a, b, w in weighted_edges(graph)}
    nodes = {e.entity_id for e in graph.entities}
    level0 = [c for c in before.communities if c.level == 0]
    new = nodes - {m for c in level0 for m in c.entity_ids}
    through_edges = {x for pair in edges.keys() ^ before.edges.keys() for x in pair} & nodes
    changed = changed_nodes(nodes, edges, before)
    region = touched_region(nodes, edges, before)
    touched = [c for c in level0 if not changed.isdisjoint(c.entity_ids)]
    sizes = sorted((len(c.entity_ids) for c in level0), reverse=True)
    print(f"{args.kind}: {len(nodes):,} entities; changed {len(changed):,} (new {len(new):,}, through a new or "
          f"vanished edge {len(through_edges - new):,}, through a weight alone {len(changed - through_edges - new):,})")
    print(f"level-0 communities {len(level0):,} (median size {sizes[len(sizes) // 2]}; largest {sizes[:6]}); "
          f"the changed entities fall in {len(touched)} holding {sum(len(c.entity_ids) for c in touched):,}")
    print(f"region re-clustered: {len(region):,} entities ({100 * len(region) / max(1, len(nodes)):.0f}%)")
    started = time.perf_counter()
    communities, _ = update_communities(graph, load_settings(environ={}).community, before)
    seconds = time.perf_counter() - started
    old = {(c.level, tuple(c.entity_ids)) for c in before.communities}
    same = sum((c.level, tuple(c.entity_ids)) in old for c in communities)
    print(f"update_communities {seconds:.1f} s; {same:,} of {len(communities):,} communities unchanged")
    summaries_after(graph, communities, old_repo, new_repo, args.kind)
    texts = [f"{r['title']}. {r['summary']}" for r in new_repo.store.read(f"communities_{args.kind}")]
    known = {f"{r['title']}. {r['summary']}" for r in old_repo.store.read(f"communities_{args.kind}")}
    print(f"summary texts of NEW's communities not in OLD's (embedded again for the community operator): "
          f"{sum(t not in known for t in texts):,} of {len(texts):,}")
    return 0


def summaries_after(graph, communities, old_repo, new_repo, kind: str) -> None:
    """What the add's summaries cost: every community's content key, then summaries for those
    whose key the old version did not have (as library._summarised does)."""
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

    from pagerag.graph.communities import weighted_edges

    graph = repo.graph(kind)
    communities = graph.communities
    edges = {(a, b): w for a, b, w in weighted_edges(graph)}
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


if __name__ == "__main__":
    sys.exit(main())
