"""One add's driver graph stages on the same library, timed in one process: read every part, the raw
graph, governance (names seeded from the tables, so no name is embedded: that cost is the add's new
names in either code). `before`: the code at PYTHONPATH (3d51480), as its add runs them (cyclic GC on).
`after`: this branch, GC paused, governance without and with the base's name memo.

    PYTHONPATH=OLD_CHECKOUT python benchmarks/library_govern.py before LIB BASE
    python benchmarks/library_govern.py after LIB BASE
LIB: the library after the add; BASE: the library before it (its names make the memo)."""
from __future__ import annotations

import gc
import json
import resource
import sys
import time
from pathlib import Path
from pagerag.settings import load_settings
from pagerag.repository import Repository
from pagerag.library import stored_mentions, _seed_names
from pagerag.graph.extract_nlp import build_raw_graph, merge_mentions
from pagerag.index.encoder import get_encoder
from pagerag.stages import MemoEmbedder

mode, lib, base = sys.argv[1:4]
settings = load_settings(environ={})
if mode == "after":
    gc.disable()

def raw_of(path):
    repo = Repository.open(Path(path)); passages = repo.passages
    t = time.perf_counter(); parts, _ = stored_mentions(repo, [s["doc_id"] for s in repo.manifest["sources"]], passages, settings)
    t1 = time.perf_counter(); raw = build_raw_graph(merge_mentions(parts), passages, settings.extract); t2 = time.perf_counter()
    return repo, passages, raw, round(t1 - t, 2), round(t2 - t1, 2)

repo, passages, raw, t_parts, t_raw = raw_of(lib)
emb = MemoEmbedder(get_encoder(settings.embed)); _seed_names(emb, repo)
out = {"mode": mode, "library": lib, "entities_raw": len(raw.entities), "relations_raw": len(raw.relations),
       "read_parts_s": t_parts, "raw_graph_s": t_raw}
if mode == "before":
    from pagerag.graph.govern import govern_with_report
    t = time.perf_counter(); g, rep = govern_with_report(raw, passages, settings.govern, embed=emb.encode)
    out["govern_s"] = round(time.perf_counter() - t, 2)
else:
    from pagerag.graph.govern import govern_library
    from pagerag.library import names_model
    brepo, bpassages, braw, _, _ = raw_of(base)
    _seed_names(emb, brepo)
    _, _, memo = govern_library(braw, bpassages, settings.govern, emb.encode, None, names_model(settings))
    del braw, bpassages
    t = time.perf_counter(); g0, rep0, _ = govern_library(raw, passages, settings.govern, emb.encode, None, names_model(settings))
    out["govern_no_memo_s"] = round(time.perf_counter() - t, 2); out["no_memo"] = rep0["names_compared"]
    t = time.perf_counter(); g, rep, _ = govern_library(raw, passages, settings.govern, emb.encode, memo, names_model(settings))
    out["govern_memo_s"] = round(time.perf_counter() - t, 2); out["memo"] = rep["names_compared"]
    out["same_graph"] = (g.entities == g0.entities and g.relations == g0.relations)
out["governed_entities"] = len(g.entities); out["governed_relations"] = len(g.relations)
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
out["load"] = open("/proc/loadavg").read().split()[:3]
print(json.dumps(out))
