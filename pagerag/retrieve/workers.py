"""Worker threads for the parts of one question that can run at once.

PPR's two walks spend their time in scipy's sparse product, which lets go of the GIL, so they run
side by side on two cores. Results do not depend on the timing: each part computes alone what it
would have computed in line. (Running the community operator beside the text floor and PPR as
well was measured and dropped: three busy threads on two cores were no faster.)
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def submit(fn: Callable[..., Any], *args: Any) -> Future:
    """Start fn(*args) on a worker thread (a pool as large as the machine's cores)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="pagerag-query")
    return _POOL.submit(fn, *args)


def side_by_side(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[Any, Any]:
    """(first(), second()), the second on a worker thread."""
    later = submit(second)
    return first(), later.result()
