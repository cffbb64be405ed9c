"""A child process's output lines, gathered by a thread as they come (tests that run asks and gcs
in other processes read them while those run)."""
from __future__ import annotations

import threading


def watch(process) -> list[str]:
    """The lines `process` prints, gathered by a thread as they come (`finish` waits for the last)."""
    lines: list[str] = []

    def gather():
        for line in process.stdout:
            lines.append(line.strip())

    process.gatherer = threading.Thread(target=gather, daemon=True)
    process.gatherer.start()
    return lines


def finish(process) -> None:
    process.wait(timeout=300)
    process.gatherer.join(timeout=60)
