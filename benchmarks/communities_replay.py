"""A library's communities grown add by add, replayed on its governed graph in seconds.

    python benchmarks/communities_replay.py REPO [--step 50] [--kind governed|raw]

REPO: a library (e.g. the last version of `benchmarks/library.py --split-words 1500`). Its
documents, in the manifest's order, arrive `--step` at a time; an entity arrives with its first
document and a relation once both ends and one of its passages have (the weights are the final
graph's: an approximation of each version's graph, without re-reading the text). The first step
is clustered as a build does (`detect_communities`), each later one with `update_communities`
from the step before. Printed at steps 2, 6, 11 and the last: the level-0 modularity of the
grown communities against a full recompute's on the same graph, and how many communities came
through the adds so far with their id, level and members (docs/library.md, "Communities on an add").
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    from pagerag.graph.communities import (Partition, changed_nodes, detect_communities, edge_weights,
                                           update_communities)
    from pagerag.records import Graph
    from pagerag.repository import Repository
    from pagerag.settings import load_settings

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo", type=Path)
    ap.add_argument("--step", type=int, default=50)
    ap.add_argument("--kind", default="governed", choices=["governed", "raw"])
    ap.add_argument("--per-step", action="store_true",
                    help="each step's entities, changed entities and the communities it made anew (summaries to make)")
    args = ap.parse_args()
    settings = load_settings(environ={}).community
    repo = Repository.open(args.repo)
    graph = repo.graph(args.kind)
    order = {s["doc_id"]: i for i, s in enumerate(repo.manifest["sources"])}
    doc_of = {p.passage_id: p.doc_id for p in repo.passages}
    arrival = {e.entity_id: min(order[doc_of[p]] for p in e.passage_ids) for e in graph.entities}
    relation_arrival = [min(order[doc_of[p]] for p in r.passage_ids) for r in graph.relations]
    steps = range(args.step, len(order) + args.step, args.step)
    previous, kept, made, started = None, 0, 0, time.perf_counter()
    for k, limit in enumerate(steps, 1):
        entities = [e for e in graph.entities if arrival[e.entity_id] < limit]
        ids = {e.entity_id for e in entities}
        relations = [r for r, at in zip(graph.relations, relation_arrival)
                     if at < limit and r.source in ids and r.target in ids]
        part = Graph(entities=entities, relations=relations)
        if previous is None:
            communities = detect_communities(part, settings)
        else:
            communities, _ = update_communities(part, settings, previous)
            before = {(c.community_id, c.level, tuple(c.entity_ids)) for c in previous.communities}
            same = sum((c.community_id, c.level, tuple(c.entity_ids)) in before for c in communities)  # kept
            kept, made = kept + same, made + len(communities)
            if args.per_step:
                changed = changed_nodes(ids, edge_weights(((r.source, r.target, r.weight) for r in relations), ids),
                                        previous)
                anew = [c for c in communities if (c.community_id, c.level, tuple(c.entity_ids)) not in before]
                print(f"step {k}: {len(entities):,} entities, {len(changed):,} changed; {len(communities):,} "
                      f"communities, {len(anew):,} made anew holding {sum(len(c.entity_ids) for c in anew):,} "
                      f"memberships", flush=True)
        previous = Partition(communities, edge_weights(((r.source, r.target, r.weight) for r in relations), ids))
        if k in (2, 6, 11, len(steps)) and not args.per_step:
            print(f"step {k}: {len(entities):,} entities; modularity {modularity(part, communities):.4f}, full recompute "
                  f"{modularity(part, detect_communities(part, settings)):.4f}; communities kept through the adds so far "
                  f"{kept:,} of {made:,} ({time.perf_counter() - started:.0f} s)", flush=True)
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
