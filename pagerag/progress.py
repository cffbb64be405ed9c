"""Progress bars for long stages (rich), and a silent variant for tests and --quiet.

A listener `(stage, completed, total)` may also watch the stages (the server streams a build's
progress with it); it is called when a stage starts, on every advance and when it ends.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Optional

ProgressListener = Callable[[str, int, Optional[int]], None]


class StageProgress:
    """One bar per stage. `with progress.stage("embed", total) as advance: advance(n)`."""

    def __init__(self, enabled: bool = True, listener: ProgressListener | None = None):
        self.enabled = enabled
        self.listener = listener
        self._progress = None

    def __enter__(self) -> "StageProgress":
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("[bold]{task.description:<12}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), console=Console(stderr=True), transient=False,
            )
            self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    @contextlib.contextmanager
    def stage(self, name: str, total: int | None) -> Iterator[Callable[[int], None]]:
        if self._progress is None and self.listener is None:
            yield lambda n=1: None
            return
        task = self._progress.add_task(name, total=total) if self._progress is not None else None
        done = 0
        if self.listener is not None:
            self.listener(name, 0, total)

        def advance(n: int = 1) -> None:
            nonlocal done
            done += n
            if task is not None:
                self._progress.advance(task, n)
            if self.listener is not None:
                self.listener(name, done, total)

        yield advance
        if task is not None:
            self._progress.update(task, completed=total if total is not None else 1, total=total or 1)
        if self.listener is not None:
            self.listener(name, total if total is not None else done, total)
