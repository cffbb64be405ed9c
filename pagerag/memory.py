"""The cyclic garbage collector, held back where the library's stages make millions of objects
that live on: collections that walk them free nothing and cost seconds at 1,000 documents."""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused():
    """No cyclic garbage collection inside: the graph stages allocate millions of small lists and
    records that all live until the version is written, so each collection the allocations
    trigger walks the whole library's graph again and frees nothing (the stages make no cycles).
    On Moby Dick's graph (one-off timings, a loaded machine): reading its mention part 4.0 s with
    it, 1.8 s without; the raw graph 6.3 and 3.1 s; governance 13.6 and 8.3 s (update collects
    once, after the version is written). Loading a query snapshot likewise: the governed view's
    pickle of a 1,000-document library in 1.45 s with it, 0.32 s without
    (benchmarks/snapshot_cost.py)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _COLLECTING["builds"]:
            # What was made inside sits in the young generation, so the collection that the next
            # allocations trigger would walk all of it again (0.8 s after a 1,000-document
            # library's raw graph). While a build runs, it is left out of every collection
            # instead, until the last build ends (fewer_collections): objects freed meanwhile
            # are freed as always, by their reference counts.
            gc.freeze()
        if was:
            gc.enable()


_COLLECTING = {"builds": 0, "threshold": None}
_COLLECTING_LOCK = threading.Lock()
BUILD_GC_THRESHOLD = 100_000  # objects allocated (net) between young-generation collections; Python's: 700


@contextmanager
def fewer_collections():
    """The cyclic garbage collector's young generation collected every 100,000 allocations, not
    700, while a build or an add runs (and back when the last one ends: a server runs them in
    threads). The graph stages make millions of small records that live to the end; each
    collection walked them again: an add of 50 documents into 912 took ~10% longer with
    Python's threshold (docs/library.md, "the collector held back"), at the same peak RSS. The
    last build's end also gives the collector back what cyclic_gc_paused froze meanwhile
    (gc.unfreeze: whatever else in the process had frozen objects too)."""
    with _COLLECTING_LOCK:
        if _COLLECTING["builds"] == 0:
            _COLLECTING["threshold"] = gc.get_threshold()
            gc.set_threshold(BUILD_GC_THRESHOLD, *_COLLECTING["threshold"][1:])
        _COLLECTING["builds"] += 1
    try:
        yield
    finally:
        with _COLLECTING_LOCK:
            _COLLECTING["builds"] -= 1
            if _COLLECTING["builds"] == 0:
                gc.set_threshold(*_COLLECTING["threshold"])
                gc.unfreeze()  # what cyclic_gc_paused left out is collected again, as the oldest generation
