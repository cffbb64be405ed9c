"""No import circles among the modules of `pagerag` (issue 31).

grimp (installed with import-linter) reads every import statement, those inside functions and
under TYPE_CHECKING included: a lazy import still makes a circle for a reader of the code. A
strongly connected component of more than one module is a circle. `lint-imports` checks the same
at package level (the `acyclic_siblings` contract in pyproject.toml); this names the modules.
"""
from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp")
nx = pytest.importorskip("networkx")


def _import_graph():
    graph = grimp.build_graph("pagerag", cache_dir=None)
    edges = nx.DiGraph()
    edges.add_nodes_from(graph.modules)
    for module in graph.modules:
        edges.add_edges_from((module, imported) for imported in graph.find_modules_directly_imported_by(module))
    return graph, edges


def test_no_module_imports_itself_back_through_others():
    graph, edges = _import_graph()
    assert len(graph.modules) > 100  # the whole package was read
    circles = sorted(sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1)
    shown = []
    for circle in circles:
        lines = [f"  {a} -> {b} (l.{', l.'.join(str(d['line_number']) for d in graph.get_import_details(importer=a, imported=b))})"
                 for a in circle for b in circle if edges.has_edge(a, b)]
        shown.append(f"{len(circle)} modules import each other round: {', '.join(circle)}\n" + "\n".join(lines))
    assert not circles, "import circles in pagerag (move the shared names down, or pass the function in):\n" + "\n".join(shown)
