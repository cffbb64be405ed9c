"""The repositories a server serves, each at exactly one version at a time.

A question takes the current version when it starts (`with registry.use(name) as version`) and
keeps it to the end. When a repository is rebuilt — by this server's build job or by anyone's
`pagerag build` — the new version is pinned (see pins.py), opened and warmed beside the old one,
then swapped in under a lock: questions in flight finish on the old version, new ones get the
new one, and the old version's files and memory go when its last question ends.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..errors import PageRAGError
from . import pins
from .config import ServeConfig
from .errors import ApiError

log = logging.getLogger("pagerag.serve")
WARM_QUESTION = "Who is the main character, and what happens to them?"


@dataclass
class Version:
    """One pinned version of one repository and the PageRAG objects opened on it."""

    repo: str
    source: Path
    path: Path  # the pinned copy the questions read
    version: str
    fingerprint: tuple
    users: int = 0
    retired: bool = False
    _rags: dict[int, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def rag(self, settings):
        """The PageRAG for these settings on this version (made once; models are per process)."""
        from ..api import PageRAG

        with self._lock:
            key = id(settings)  # settings objects are cached per (pipeline, llm) by ServeConfig
            if key not in self._rags:
                self._rags[key] = PageRAG(self.path, settings=settings)
            return self._rags[key]

    @functools.cached_property
    def repository(self):
        from ..repository import Repository

        return Repository.open(self.path)

    @property
    def manifest(self) -> dict[str, Any]:
        return self.repository.manifest

    def describe(self) -> dict[str, Any]:
        manifest = self.manifest
        return {
            "name": self.repo, "version": self.version,  # no path: clients see names, not the server's disk
            "created": manifest.get("created"), "pagerag_version": manifest.get("pagerag_version"),
            "extractor": manifest.get("extractor"),
            "sources": [{"doc_id": s.get("doc_id"), "file": Path(str(s.get("path", ""))).name,
                         "format": s.get("format", "text"), "words": s.get("words")}
                        for s in manifest.get("sources", [])],
            "stats": self.repository.stats(),
            "stage_seconds": manifest.get("stage_seconds", {}),
        }

    def close(self) -> None:
        for rag in self._rags.values():
            rag.close()
        self._rags.clear()
        pins.release(self.path)


@dataclass
class Served:
    name: str
    source: Path
    current: Version | None = None
    reloading: bool = False
    failed_fingerprint: tuple | None = None  # a version that would not open: not retried until it changes
    error: str | None = None
    built_by_job: bool = False  # created by a build job of this server (may be removed through the API)


class Registry:
    def __init__(self, config: ServeConfig):
        self.config = config
        self._served: dict[str, Served] = {}
        self._lock = threading.Lock()
        self._closed = False

    # ---- opening ---------------------------------------------------------------------------

    def start(self) -> "Registry":
        """Open every configured repository now (a missing or damaged one fails the start)."""
        for name, source in self.config.repos.items():
            self.add(name, source)
        return self

    def add(self, name: str, source: Path, built_by_job: bool = False) -> Version:
        """Serve the repository at `source` under `name` (or swap in its new version);
        `built_by_job`: a build job of this server created it."""
        source = Path(source).resolve()
        with self._lock:
            served = self._served.get(name)
            if served is not None:
                served.reloading = True  # no background reload of the same version meanwhile
        try:
            version = self._open(name, source)  # a new name is listed only once it opens
        finally:
            if served is not None:
                served.reloading = False
        with self._lock:
            served = self._served.setdefault(name, Served(name, source, built_by_job=built_by_job))
        return self._swap_in(served, version)

    def _open(self, name: str, source: Path) -> Version:
        from ..repository import Repository

        Repository.open(source)  # a missing, foreign or newer-format directory: its own clear message
        stamp = pins.fingerprint(source)
        path, version_id = pins.pin(source)
        version = Version(name, source, path, version_id, stamp)
        try:
            rag = version.rag(self.config.settings())
            if self.config.warm:
                self._warm(rag)
        except BaseException:
            version.close()
            raise
        return version

    def _warm(self, rag) -> None:
        """Load what the first question would (state, encoder, prototypes, IDF) before swapping."""
        rag.retrieve(WARM_QUESTION)
        if rag.llm is None:  # the extractive path costs no tokens: run it all
            rag.ask(WARM_QUESTION)

    def _swap_in(self, served: Served, version: Version) -> Version:
        with self._lock:
            old = served.current
            served.failed_fingerprint, served.error = None, None
            if old is not None and old.version == version.version:
                # the same version (pinned in the same directory): keep the one already open
                old.fingerprint = version.fingerprint
                return old
            served.current = version
            release = old is not None and old.users == 0
            if old is not None:
                old.retired = True
        if release:
            old.close()
        pins.prune(served.source, keep=version.version)  # copies left by servers that died
        log.info("serving %s version %s from %s", served.name, version.version, version.path)
        return version

    # ---- using ------------------------------------------------------------------------------

    def names(self) -> list[str]:
        with self._lock:
            return list(self._served)

    def resolve(self, name: str | None) -> Served:
        with self._lock:
            if name is None:
                if len(self._served) == 1:
                    return next(iter(self._served.values()))
                raise ApiError(400, f"several repositories are served ({', '.join(self._served)}): name one with \"repo\"",
                               "invalid_request_error")
            served = self._served.get(name)
        if served is None:
            raise ApiError(404, f"no repository named '{name}' is served (served: {', '.join(self.names())})",
                           "not_found_error")
        return served

    @contextlib.contextmanager
    def use(self, name: str | None) -> Iterator[Version]:
        """The current version of a repository, held until the block ends."""
        served = self.resolve(name)
        self._check_for_rebuild(served)
        with self._lock:
            version = served.current
            if version is None:
                raise ApiError(503, f"repository '{served.name}' is not available: {served.error or 'not loaded'}",
                               "unavailable_error")
            version.users += 1
        try:
            yield version
        finally:
            with self._lock:
                version.users -= 1
                release = version.retired and version.users == 0
            if release:
                version.close()

    def current(self, name: str | None) -> Version:
        served = self.resolve(name)
        if served.current is None:
            raise ApiError(503, f"repository '{served.name}' is not available", "unavailable_error")
        return served.current

    def remove(self, name: str) -> Served:
        """Stop serving `name`: new questions get 404; its version goes when its last question
        ends (its files too, see pins.release)."""
        served = self.resolve(name)
        with self._lock:
            self._served.pop(name, None)
            version = served.current
            release = version is not None and version.users == 0
            if version is not None:
                version.retired = True
        if release:
            version.close()
        return served

    def reload(self, name: str) -> Version:
        """Open the version now published for `name` and swap it in (blocking)."""
        return self.add(name, self.resolve(name).source)

    # ---- rebuilds made by someone else -------------------------------------------------------

    def _check_for_rebuild(self, served: Served) -> None:
        """A changed fingerprint starts a reload in the background; questions keep the old
        version until the new one is open and warm."""
        current = served.current
        if current is None or served.reloading or self._closed:
            return
        stamp = pins.fingerprint(served.source)
        if stamp == current.fingerprint or stamp == served.failed_fingerprint or stamp == (0, 0, 0):
            return
        with self._lock:
            if served.reloading:
                return
            served.reloading = True
        threading.Thread(target=self._background_reload, args=(served, stamp), name=f"reload-{served.name}",
                         daemon=True).start()

    def _background_reload(self, served: Served, stamp: tuple) -> None:
        try:
            self._swap_in(served, self._open(served.name, served.source))
        except PageRAGError as exc:
            log.warning("repository %s changed but its new version cannot be opened: %s", served.name, exc)
            served.failed_fingerprint, served.error = stamp, str(exc)
        except Exception as exc:  # keep serving the old version; say why once
            log.exception("repository %s: reloading failed", served.name)
            served.failed_fingerprint, served.error = stamp, f"{exc.__class__.__name__}: {exc}"
        finally:
            served.reloading = False

    def close(self) -> None:
        self._closed = True
        with self._lock:
            versions = [s.current for s in self._served.values() if s.current is not None]
        for version in versions:
            version.close()
