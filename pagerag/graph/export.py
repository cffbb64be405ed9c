"""Export a graph as GraphML (Gephi, networkx). Lists become ';'-joined strings: GraphML has no lists."""
from __future__ import annotations

from pathlib import Path

from ..records import Graph


def to_networkx(graph: Graph):
    import networkx as nx

    g = nx.Graph()
    for e in graph.entities:
        g.add_node(e.entity_id, name=e.name, type=e.type, mentions=e.mentions, aliases=";".join(e.aliases),
                   passage_ids=";".join(e.passage_ids))
    for r in graph.relations:
        if g.has_edge(r.source, r.target):
            data = g.edges[r.source, r.target]
            data["weight"] += r.weight
            data["label"] = f"{data['label']}; {r.label}"
            continue
        g.add_edge(r.source, r.target, label=r.label, kind=r.kind, weight=float(r.weight),
                   passage_ids=";".join(r.passage_ids))
    for c in graph.communities:
        for member in c.entity_ids:
            if member in g and c.level == 0:
                g.nodes[member]["community"] = c.community_id
    return g


def write_graphml(graph: Graph, path: Path) -> dict[str, int]:
    import networkx as nx

    g = to_networkx(graph)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    nx.write_graphml(g, tmp)
    tmp.replace(path)
    return {"nodes": g.number_of_nodes(), "edges": g.number_of_edges()}
