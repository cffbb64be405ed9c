"""A repository's versions: which are kept, how many bytes they hold, and collecting old ones.

On local disk the published version is R itself; each publish moves the version it replaced to
`.<R>.versions/<n>/` (repository.publish; n in publish order), and these share their unchanged
files with R through hard links, so a file's bytes are counted once whatever holds it. A reader
holds its version with a shared flock on the directory (repository.PinnedDirectory); `collect`
keeps R and the newest keep-1 old versions, and removes each older one only once it holds it
with an exclusive lock (never one a reader holds), renaming it to `.collect-<n>` first, so a gc
killed mid-way leaves a leftover no one takes for a version (the next gc removes it) and never
touches R. It runs under the writer lock: no publish moves versions meanwhile.

On S3 (`s3://bucket/prefix`) the same question is answered by objectstore.ObjectRepository.collect,
with leases instead of locks.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError
from .objectstore import Collected, ObjectRepository, remote_uri
from .repository import WriterLock, clean_stale_staging, read_manifest, versions_dir

COLLECTING = ".collect-"
LEGACY_PREVIOUS = ".{name}.previous"  # where pagerag kept the one version before this one


@dataclass
class Kept:
    """How many versions a repository keeps (the current one included) and the bytes they hold."""

    versions: int
    bytes: int

    def describe(self) -> str:
        return f"{self.versions} version{'s' if self.versions != 1 else ''} kept, {human_bytes(self.bytes)}"


@dataclass
class OldVersion:
    path: Path
    order: int  # publish order: higher is newer
    number: int | None  # the library version its manifest names


# --------------------------------------------------------------------------------------------
# Either kind of repository


def kept(repo: str | Path) -> Kept:
    """The versions and bytes the repository at `repo` keeps now."""
    uri = remote_uri(repo)
    if uri is not None:
        stored = ObjectRepository(uri).stored()
        return Kept(stored.versions, stored.bytes)
    old = [v.path for v in old_versions(Path(repo))]
    return Kept(1 + len(old), tree_bytes([Path(repo), *old]))


def collect(repo: str | Path, keep: int, wait: bool = False) -> Collected:
    """`pagerag gc`: remove the versions older than the last `keep` that no reader holds, and
    what no kept version references."""
    if keep < 1:
        raise InputError(f"--keep must be at least 1 (the current version is always kept), got {keep}")
    uri = remote_uri(repo)
    if uri is not None:
        return ObjectRepository(uri).collect(keep)
    repo = Path(repo)
    read_manifest(repo)  # one line for a path that is no repository
    with WriterLock(repo, wait=wait):
        clean_stale_staging(repo)
        return collect_locked(repo, keep)


# --------------------------------------------------------------------------------------------
# Local disk


def collect_locked(repo: Path, keep: int, measure: bool = True) -> Collected:
    """`collect` for a local repository whose writer lock the caller holds (an add collects as
    it publishes, and does not `measure` the bytes: a walk over every file of the library)."""
    remove_leftovers(repo)
    old = old_versions(repo)
    before = tree_bytes([repo, *(v.path for v in old)]) if measure else 0
    done = Collected(kept=[_number(repo)] + [v.number for v in old[: keep - 1]], held=[], removed=[])
    survivors = old[: keep - 1]
    for version in old[keep - 1:]:
        if remove_unheld(version.path, repo):
            done.removed.append(version.number)
        else:
            done.held.append(version.number)
            survivors.append(version)
    done.kept += done.held
    if measure:
        done.bytes_kept = tree_bytes([repo, *(v.path for v in survivors)])
        done.bytes_freed = max(0, before - done.bytes_kept)
    return done


def old_versions(repo: Path) -> list[OldVersion]:
    """The repository's old versions, newest first (a legacy `.<repo>.previous` is the oldest)."""
    repo = repo.resolve()
    found = []
    folder = versions_dir(repo)
    if folder.is_dir():
        found = [OldVersion(p, int(p.name), _number(p)) for p in folder.iterdir() if p.name.isdigit() and p.is_dir()]
    previous = repo.parent / LEGACY_PREVIOUS.format(name=repo.name)
    if previous.is_dir():
        found.append(OldVersion(previous, 0, _number(previous)))
    return sorted(found, key=lambda v: v.order, reverse=True)


def remove_unheld(path: Path, repo: Path) -> bool:
    """Remove `repo`'s old version directory `path` unless a reader holds it (a shared flock:
    see repository.PinnedDirectory); True when it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return True
    try:
        if not _lock_exclusively(fd):
            return False
        # renamed first: a gc killed while deleting leaves a `.collect-` leftover, never a
        # half-deleted directory that looks like a version
        doomed = versions_dir(repo) / f"{COLLECTING}{path.name.strip('.')}"
        doomed.parent.mkdir(exist_ok=True)  # (a legacy `.<repo>.previous` lives beside the repository)
        os.rename(path, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return True
    finally:
        os.close(fd)  # the lock goes with it


def _lock_exclusively(fd: int) -> bool:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def remove_leftovers(repo: Path) -> None:
    """What a killed gc was removing."""
    folder = versions_dir(repo)
    if folder.is_dir():
        for leftover in folder.glob(f"{COLLECTING}*"):
            shutil.rmtree(leftover, ignore_errors=True)


def tree_bytes(roots: list[Path]) -> int:
    """Bytes of the files under `roots`, each file (inode) once: versions share files by hard links."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for root in roots:
        for here, _dirs, names in os.walk(root):
            for name in names:
                try:
                    st = os.stat(os.path.join(here, name), follow_symlinks=False)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_size
    return total


def _number(path: Path) -> int | None:
    try:
        return int((read_manifest(path).get("library") or {}).get("version", 1))
    except Exception:  # an unreadable old version is still an old version
        return None


def human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
