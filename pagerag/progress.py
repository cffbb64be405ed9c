"""Progress bars for long stages (rich), and a silent variant for tests and --quiet."""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator


class StageProgress:
    """One bar per stage. `with progress.stage("embed", total) as advance: advance(n)`."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
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
        if self._progress is None:
            yield lambda n=1: None
            return
        task = self._progress.add_task(name, total=total)
        yield lambda n=1: self._progress.advance(task, n)
        self._progress.update(task, completed=total if total is not None else 1, total=total or 1)
