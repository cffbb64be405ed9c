"""Find the data files that ship with the package: pipeline presets, prompts, corpora catalog.

In a wheel they live in `pagerag/pipelines`, `pagerag/prompts`, `pagerag/corpora` (see
pyproject.toml); in a source checkout they sit at the top level beside `pagerag/`.
"""
from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The directory of packaged data files called `name` (pipelines, prompts, corpora)."""
    installed = _PACKAGE_DIR / name
    if installed.is_dir():
        return installed
    checkout = _PACKAGE_DIR.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"packaged data directory '{name}' not found next to {_PACKAGE_DIR}")


def load_prompt(name: str) -> str:
    """The text of prompt template `name` (a file prompts/<name>.txt)."""
    path = resource_dir("prompts") / f"{name}.txt"
    return path.read_text(encoding="utf-8")


def sha256_of(path: Path) -> str:
    """A file's sha256 (hex), read in 1 MiB blocks: the one checksum of model files, downloads and
    object-storage blobs."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def cache_lock(directory: Path):
    """Hold an exclusive lock on a cache directory (its `.lock` file) while one process fills it:
    the ONNX export and OpenVINO's compiled-model cache are written once and read by every
    process after, and two first processes at once (a test run's two workers, a server beside a
    build) otherwise write the same files over each other."""
    import fcntl

    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
