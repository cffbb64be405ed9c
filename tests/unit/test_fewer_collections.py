"""A build or an add runs with the young generation collected less often (memory.fewer_collections),
and Python's threshold is back when the last of them ends, however it ends."""
from __future__ import annotations

import gc
import threading

import pytest

from pagerag.memory import BUILD_GC_THRESHOLD, fewer_collections


def test_the_threshold_is_raised_while_builds_run_and_restored_after_the_last():
    before = gc.get_threshold()
    started, release = threading.Event(), threading.Event()

    def other_build() -> None:
        with fewer_collections():
            started.set()
            release.wait(10)

    thread = threading.Thread(target=other_build)
    thread.start()
    started.wait(10)
    with fewer_collections():
        assert gc.get_threshold() == (BUILD_GC_THRESHOLD, *before[1:])
    assert gc.get_threshold()[0] == BUILD_GC_THRESHOLD  # the other build still runs
    release.set()
    thread.join(10)
    assert gc.get_threshold() == before


def test_a_failing_build_restores_the_threshold():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("interrupted")
    assert gc.get_threshold() == before


def test_what_a_paused_stage_made_is_left_out_of_collections_until_the_last_build_ends():
    """Inside a build, objects made with the collector paused go to the permanent generation
    (the next collections do not walk them again); outside one they do not, and the last build's
    end gives them back."""
    from pagerag.memory import cyclic_gc_paused

    before = gc.get_freeze_count()
    with cyclic_gc_paused():
        made = [[i] for i in range(1000)]
    assert gc.get_freeze_count() == before  # no build running: nothing is frozen
    with fewer_collections():
        with cyclic_gc_paused():
            made += [[i] for i in range(1000)]
        assert gc.get_freeze_count() >= before + 2000
        assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    del made
