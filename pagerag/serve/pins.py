"""Pinned copies of a repository version, so a served version never reads another version's files.

A build publishes by swapping the whole repository directory (rename exchange) and deleting the
old one, while the query code still reads some files lazily (source texts, the BM25 index, the
repository's RCS model). A server pins each version it serves: a copy made of hard links (no data
is copied) in `.<repo>.serve/<version>/` beside the repository — or a real copy under the cache
directory when the repository's folder is not writable — and opens the copy. The old version's
files then live until its last question ends, whatever happens to the published directory.

The copy is taken through a file descriptor of the directory, and kept only if that directory is
still the published one when the copy is complete, so it never mixes two versions.
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
from pathlib import Path

from ..errors import RepositoryError
from ..repository import pid_alive

MANIFEST = "manifest.json"
RCS_MODEL = "rcs_model.json"  # written by `pagerag calibrate` beside the manifest
ATTEMPTS = 5


def fingerprint(source: Path) -> tuple[int, int, int]:
    """Cheap stamp of the published version: directory inode, manifest and RCS-model mtimes."""
    try:
        directory = os.stat(source).st_ino
        manifest = os.stat(source / MANIFEST).st_mtime_ns
    except OSError:
        return (0, 0, 0)
    try:
        model = os.stat(source / RCS_MODEL).st_mtime_ns
    except OSError:
        model = 0
    return (directory, manifest, model)


def pins_root(source: Path) -> Path:
    """Where the pinned copies of `source` live: beside it when its folder is writable."""
    source = source.resolve()
    beside = source.parent / f".{source.name}.serve"
    try:
        beside.mkdir(exist_ok=True)
        probe = beside / f".probe-{os.getpid()}"
        probe.mkdir()
        probe.rmdir()
        return beside
    except OSError:
        from ..offline import cache_root

        digest = hashlib.sha256(str(source).encode()).hexdigest()[:16]
        fallback = cache_root() / "serve" / f"{source.name}-{digest}"
        fallback.mkdir(parents=True, exist_ok=True)
        return fallback


def pin(source: Path) -> tuple[Path, str]:
    """(path of a pinned copy of the version now published at `source`, its version id)."""
    source = source.resolve()
    root = pins_root(source)
    for _ in range(ATTEMPTS):
        try:
            fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise RepositoryError(f"{source}: cannot open the repository ({exc.strerror or exc})") from None
        try:
            pinned = _pin_from(fd, source, root)
        finally:
            os.close(fd)
        if pinned is not None:
            return pinned
    raise RepositoryError(f"{source}: the repository kept changing while it was being opened; try again")


def _pin_from(fd: int, source: Path, root: Path) -> tuple[Path, str] | None:
    """Copy the directory open at `fd`; None when it stopped being the published one meanwhile."""
    try:
        version = version_id(_read_at(fd, MANIFEST), _read_at(fd, RCS_MODEL, missing_ok=True))
    except FileNotFoundError:
        return None
    target = root / version
    _register_user(root, version)  # before the copy exists: another process's prune keeps it
    if target.is_dir():
        return target, version  # another process (or an earlier run) pinned this version
    tmp = root / f"{version}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _link_tree(fd, tmp)
    except FileNotFoundError:  # the directory was being deleted under us: a new version is in place
        shutil.rmtree(tmp, ignore_errors=True)
        _unregister_user(root, version)
        return None
    if os.fstat(fd).st_ino != _inode(source):
        shutil.rmtree(tmp, ignore_errors=True)
        _unregister_user(root, version)
        return None
    try:
        os.rename(tmp, target)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
    return target, version


def version_id(manifest: bytes, rcs_model: bytes = b"") -> str:
    return hashlib.sha256(manifest + b"\x00" + rcs_model).hexdigest()[:12]


def _read_at(fd: int, name: str, missing_ok: bool = False) -> bytes:
    try:
        handle = os.open(name, os.O_RDONLY, dir_fd=fd)
    except FileNotFoundError:
        if missing_ok:
            return b""
        raise
    with os.fdopen(handle, "rb") as fh:
        return fh.read()


def _inode(path: Path) -> int:
    try:
        return os.stat(path).st_ino
    except OSError:
        return -1


def _link_tree(fd: int, target: Path) -> None:
    """Hard-link (or, across file systems, copy) every file under the directory `fd` into `target`."""
    for dirpath, _dirs, files, dir_fd in os.fwalk(".", dir_fd=fd):
        out = target / dirpath
        out.mkdir(parents=True, exist_ok=True)
        for name in files:
            try:
                os.link(name, out / name, src_dir_fd=dir_fd, follow_symlinks=False)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                    raise
                _copy_at(dir_fd, name, out / name)


def _copy_at(dir_fd: int, name: str, dest: Path) -> None:
    handle = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
    with os.fdopen(handle, "rb") as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


# --------------------------------------------------------------------------------------------
# Who uses a pinned version: one marker file per serving process, so a version is deleted only
# when no live process serves it.


def _users(root: Path, version: str) -> Path:
    return root / f"{version}.users"


def _register_user(root: Path, version: str) -> None:
    users = _users(root, version)
    users.mkdir(exist_ok=True)
    (users / str(os.getpid())).touch()


def _unregister_user(root: Path, version: str) -> None:
    (_users(root, version) / str(os.getpid())).unlink(missing_ok=True)


def release(pinned: Path) -> None:
    """This process no longer serves `pinned`; delete it when no other live process does."""
    root, version = pinned.parent, pinned.name
    users = _users(root, version)
    (users / str(os.getpid())).unlink(missing_ok=True)
    if not _live_users(users):
        shutil.rmtree(pinned, ignore_errors=True)
        shutil.rmtree(users, ignore_errors=True)


def prune(source: Path, keep: str) -> None:
    """Delete pinned versions of `source` other than `keep` that no live process serves, and
    half-made copies of dead processes."""
    root = pins_root(source.resolve())
    for entry in root.iterdir():
        name = entry.name
        if ".tmp-" in name:
            pid = name.rsplit("-", 1)[-1]
            if pid.isdigit() and not pid_alive(int(pid)):
                shutil.rmtree(entry, ignore_errors=True)
        elif entry.is_dir() and not name.endswith(".users") and name != keep and not name.startswith("."):
            users = _users(root, name)
            if not _live_users(users):
                shutil.rmtree(entry, ignore_errors=True)
                shutil.rmtree(users, ignore_errors=True)


def forget(source: Path) -> None:
    """`source` was removed: delete its pinned versions that no live process serves, and their
    folder once empty (a version still answering a question goes when it ends: release)."""
    root = pins_root(source.resolve())
    prune(source, keep="")
    for users in root.glob("*.users"):
        if not _live_users(users):
            shutil.rmtree(users, ignore_errors=True)
    try:
        root.rmdir()
    except OSError:
        pass  # a version is still in use


def _live_users(users: Path) -> list[int]:
    if not users.is_dir():
        return []
    live = []
    for marker in users.iterdir():
        if marker.name.isdigit():
            if pid_alive(int(marker.name)):
                live.append(int(marker.name))
            else:
                marker.unlink(missing_ok=True)
    return live
