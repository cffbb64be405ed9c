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

__all__ = ["BuildReport", "build_repository", "cache_dir_for", "prefetch_models"]


def build_repository(
    paths: list[str | Path], repo: str | Path, settings: Settings, show_progress: bool = True,
    on_progress: ProgressListener | None = None, root: Path | None = None, password: str | None = None,
    on_note: Callable[[str], None] | None = None, wait: bool = False, executor: str = "local",
    ray_address: str | None = None,
) -> BuildReport:
    """Build a repository from `paths` and publish it atomically at `repo`. `on_progress(stage,
    completed, total)` watches the stages (with or without the progress bars). With `root` (a
    server's build root) every file read must really lie under it, symbolic links resolved.
    `password` opens encrypted PDFs; `on_note(text)` hears, once loading is done, what it
    skipped (unsupported files in a folder, PDF pages without text). `executor` = ray runs the
    text stages on a Ray cluster (`ray_address`, else a local one)."""
    return update(repo, settings, paths=paths, fresh=True, show_progress=show_progress, on_progress=on_progress,
                  root=root, password=password, on_note=on_note, wait=wait, executor=executor, ray_address=ray_address)


def add_documents(paths: list[str | Path], repo: str | Path, settings: Settings, **options) -> BuildReport:
    """Add documents to the library at `repo` (a new version; a document already there is skipped)."""
    return update(repo, settings, paths=paths, **options)


def remove_documents(doc_ids: list[str], repo: str | Path, settings: Settings, **options) -> BuildReport:
    """Remove documents (by id) from the library at `repo` (a new version)."""
    return update(repo, settings, remove=doc_ids, **options)


def prefetch_models(settings: Settings) -> None:
    """For a process about to build (`pagerag build`, a server's build job): a small build's time
    is mostly loading the encoder's runtime and compiled model, spaCy and its pipeline, then
    bm25s, LanceDB (~1 s: its namespace client's 150 generated models) and networkx. Start them
    now in background threads, so they overlap the stages that come before each is needed (the
    encoder's inference releases the GIL). spaCy only on the ONNX and OpenVINO paths, where
    nothing else imports torch meanwhile (text.nlp). A failure in a thread is left for the build,
    which meets it again where it loads that model, and reports it."""
    import threading

    from .errors import PageRAGError
    from .graph.extract_nlp import nlp_pipes_disabled
    from .index.encoder import choose, prefetch_encoder
    from .text.nlp import prefetch_spacy

    try:
        backend = choose(settings.embed.model, settings.embed.backend, settings.embed.precision).backend
    except PageRAGError:
        return  # the build reports the encoder's problem itself
    prefetch_encoder(settings.embed)
    if settings.extract.extractor == "nlp" and backend in ("onnx", "openvino"):
        prefetch_spacy(settings.extract.spacy_model, nlp_pipes_disabled(settings.extract))
    threading.Thread(target=_import_build_libraries, name="build-imports", daemon=True).start()


def _import_build_libraries() -> None:
    """In the order the build needs them: BM25's, the table store's, the query snapshot's graph."""
    from .index.lexical import import_bm25s
    from .index.store import import_lancedb

    try:
        import_bm25s()
        import_lancedb()
        import networkx  # noqa: F401
        import scipy.sparse  # noqa: F401
    except BaseException:  # noqa: BLE001 - met again, and reported, where the build imports it
        pass
