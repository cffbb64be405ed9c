"""The CLI's commands beyond build/inspect/export/config (registered in pagerag/cli.py)."""
from __future__ import annotations

from pathlib import Path


def check_local_repository(repo: Path) -> None:
    """Open a local repository once (its manifest and layout: Repository.open's one-line errors),
    so that a bad --repo fails before a one-shot command starts loading its models in threads (its
    exit would wait for their loads); a repository on object storage is downloaded by the
    command's first open, beside the loads."""
    from ..objectstore import remote_uri
    from ..repository import Repository

    if remote_uri(repo) is None:
        Repository.open(repo)
