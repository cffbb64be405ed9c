"""A build job's process: `python -m pagerag.serve.build_worker --repo DIR PATH...`.

The server runs each build in its own process, so the build's CPU work does not hold the
server's interpreter while questions are answered, and a build that fails cannot take the server
down. Progress goes to the parent as JSON lines on stdout (anything else the libraries print is
sent to stderr):

    {"event": "progress", "stage": "embed", "completed": 512, "total": 2081}
    {"event": "done", "stats": {...}, "resumed": ["embed"]}
    {"event": "error", "message": "one line"}

SIGTERM cancels the build (the server's DELETE /v1/builds/{id}): the build stops where it is and
removes its staging directory, so nothing is published — unless it is already publishing, when
it finishes (a repository is published whole or not at all).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

MIN_INTERVAL_S = 0.25  # at most ~4 progress lines per second per stage
PUBLISHING = 2  # the publish stage's step after which the new version is being swapped in


class Cancelled(BaseException):
    """SIGTERM: a BaseException, so that no library's `except Exception` swallows it."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pagerag.serve.build_worker")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--repo", required=True)
    parser.add_argument("--pipeline")
    parser.add_argument("--llm", help="The server's LLM backend (the only one an LLM extractor may use).")
    parser.add_argument("--config")
    parser.add_argument("--set", dest="sets", action="append", default=[])
    parser.add_argument("--root", help="Read only files whose real path lies under this folder (the build root).")
    args = parser.parse_args(argv)

    events = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # stray prints from libraries must not corrupt the event stream
    sys.stdout = sys.stderr

    def emit(**event) -> None:
        events.write(json.dumps(event) + "\n")

    publishing = {"now": False}
    signal.signal(signal.SIGTERM, _cancel_unless(publishing))
    try:
        from ..build import build_repository
        from ..settings import load_settings

        settings = load_settings(args.pipeline, args.config, sets=args.sets, llm=args.llm)
        report = build_repository(args.paths, args.repo, settings, show_progress=False,
                                  on_progress=_watch_publish(publishing, _throttled(emit)),
                                  root=Path(args.root) if args.root else None, prefetch=True)  # it only builds
        emit(event="done", stats=report.manifest["stats"], resumed=report.resumed_stages)
        return 0
    except Cancelled:  # build_repository's own cleanup has removed the staging directory
        emit(event="error", message="cancelled; nothing was published")
        return 143
    except KeyboardInterrupt:
        emit(event="error", message="the build was interrupted; the previous repository is intact")
        return 130
    except Exception as exc:
        from ..errors import PageRAGError

        if isinstance(exc, PageRAGError):
            emit(event="error", message=" ".join(str(exc).split()))
            return exc.exit_code
        import traceback

        traceback.print_exc()
        emit(event="error", message=f"{exc.__class__.__name__}: {' '.join(str(exc).split())}")
        return 1


def _cancel_unless(publishing: dict):
    def handler(_signum, _frame) -> None:
        if not publishing["now"]:
            raise Cancelled()

    return handler


def _watch_publish(publishing: dict, listener):
    def watch(stage: str, completed: int, total: int | None) -> None:
        if stage == "publish" and completed >= PUBLISHING:
            publishing["now"] = True  # too late to cancel: finish, so the swap is whole
        listener(stage, completed, total)

    return watch


def _throttled(emit):
    last: dict[str, float] = {}

    def listener(stage: str, completed: int, total: int | None) -> None:
        now = time.monotonic()
        finished = total is not None and completed >= total
        if completed == 0 or finished or now - last.get(stage, 0.0) >= MIN_INTERVAL_S:
            last[stage] = now
            emit(event="progress", stage=stage, completed=completed, total=total)

    return listener


if __name__ == "__main__":
    sys.exit(main())
