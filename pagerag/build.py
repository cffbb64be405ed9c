"""`pagerag build`: load → chunk → embed → index → extract → govern → communities → summarise →
provenance → publish (atomic). A build is the first version of a library: the same engine as
`pagerag add` and `pagerag remove` (pagerag.update, pagerag.library), from no base, so a build
of some documents and a library grown to the same documents agree. Each stage is a function in
its own module; the engine wires them, times them, caches the expensive outputs so an
interrupted build resumes (`.<repo>.cache/`), and publishes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from .progress import ProgressListener
from .settings import Settings
from .update import BuildReport, cache_dir_for, update

__all__ = ["BuildReport", "build_repository", "cache_dir_for"]


def build_repository(
    paths: list[str | Path], repo: str | Path, settings: Settings, show_progress: bool = True,
    on_progress: ProgressListener | None = None, root: Path | None = None, password: str | None = None,
    on_note: Callable[[str], None] | None = None, wait: bool = False, executor: str = "local",
    ray_address: str | None = None, prefetch: bool = False,
) -> BuildReport:
    """Build a repository from `paths` and publish it atomically at `repo`. `on_progress(stage,
    completed, total)` watches the stages (with or without the progress bars). With `root` (a
    server's build root) every file read must really lie under it, symbolic links resolved.
    `password` opens encrypted PDFs; `on_note(text)` hears, once loading is done, what it
    skipped (unsupported files in a folder, PDF pages without text). `executor` = ray runs the
    text stages on a Ray cluster (`ray_address`, else a local one). `prefetch`: a process that
    only builds loads its models in threads beside the first stages (update.prefetch_models)."""
    return update(repo, settings, paths=paths, fresh=True, show_progress=show_progress, on_progress=on_progress,
                  root=root, password=password, on_note=on_note, wait=wait, executor=executor, ray_address=ray_address,
                  prefetch=prefetch)


def add_documents(paths: list[str | Path], repo: str | Path, settings: Settings, **options) -> BuildReport:
    """Add documents to the library at `repo` (a new version; a document already there is skipped)."""
    return update(repo, settings, paths=paths, **options)


def remove_documents(doc_ids: list[str], repo: str | Path, settings: Settings, **options) -> BuildReport:
    """Remove documents (by id) from the library at `repo` (a new version)."""
    return update(repo, settings, remove=doc_ids, **options)

