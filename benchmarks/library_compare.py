"""Governed and raw graphs of two repositories of the same documents: equal? how many entities and relations differ?

    python benchmarks/library_compare.py REPO_A REPO_B
"""
import sys
from dataclasses import asdict
from pathlib import Path
from pagerag.repository import Repository

a, b = (Repository.open(Path(p)) for p in sys.argv[1:3])
for kind in ("raw", "governed"):
    ga, gb = a.graph(kind), b.graph(kind)
    ea = {e.entity_id: asdict(e) for e in ga.entities}
    eb = {e.entity_id: asdict(e) for e in gb.entities}
    ra = {r.relation_id: asdict(r) for r in ga.relations}
    rb = {r.relation_id: asdict(r) for r in gb.relations}
    diff_e = sum(1 for k in set(ea) | set(eb) if ea.get(k) != eb.get(k))
    diff_r = sum(1 for k in set(ra) | set(rb) if ra.get(k) != rb.get(k))
    print(kind, "entities", len(ea), len(eb), "differ", diff_e, "| relations", len(ra), len(rb), "differ", diff_r,
          "| identical" if (ea == eb and ra == rb) else "")
