"""Per-repository query state, built once per process and reused by every question.

Opening a repository reads tables lazily; a question should not pay for that twice. `get_state`
caches, per repository directory (and manifest version), the passages and their vectors, and
per graph kind a `GraphView` (views.py): the networkx graph with aggregated edges, the entity
name index used by the linker, the entity name vectors, and what the community operator reads
(each community's passage rows and its vector), kept in the view's snapshot.
"""
from __future__ import annotations

import functools
import hashlib
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import RepositoryError
from ..memory import cyclic_gc_paused
from .views import (GraphView, all_member_degrees, build_ppr_graph, build_view, community_passage_centrality,
                    composed_community_vectors)
from .views import EdgeInfo, WordBlock  # noqa: F401 - still importable from here

PREBUILT_VIEW = "governed"  # the graph view the build snapshots (settings.retrieve.graph's default)


class RepoState:
    """Everything a question needs from one repository, loaded once.

    The first time a repository version is opened, its passages, vectors and graph views are
    also written to a snapshot in the cache dir; later processes load that pickle instead of
    importing LanceDB and rebuilding the networkx graphs, which is most of a cold start.
    """

    def __init__(self, path: Path, manifest: dict[str, Any], repo=None):
        self.path = path
        self.manifest = manifest
        if repo is not None:
            self.repo = repo  # opened (and pinned) with the manifest: one version throughout
        self._lock = threading.RLock()  # memo() may build a value that needs view()
        self._sources: dict[str, str] = {}
        self._memo: dict[Any, Any] = {}
        snapshot = _load_snapshot(self.key)
        self._views = {}
        if snapshot is not None:
            self.passages, self.vectors, self._stem_df = snapshot
            self.passage_index = {p.passage_id: i for i, p in enumerate(self.passages)}
            return
        with cyclic_gc_paused():  # everything made here lives on with the state (see view())
            self._stem_df = None
            self._read_tables()
            self.passage_index = {p.passage_id: i for i, p in enumerate(self.passages)}
            self._save_snapshot()

    def _read_tables(self) -> None:
        try:
            self.passages = self.repo.passages
            self.vectors = np.ascontiguousarray(self.repo.passage_vectors, dtype=np.float32)
        except RepositoryError:
            raise
        except Exception as exc:  # a half-written or damaged table: name it, no traceback
            raise RepositoryError(f"{self.path}: repository is damaged or half-written ({_short(exc)}); rebuild it") from None
        if self.vectors.shape[0] != len(self.passages):
            raise RepositoryError(
                f"{self.path}: {self.vectors.shape[0]} passage vectors for {len(self.passages)} passages; rebuild it")

    def _save_snapshot(self) -> None:
        """Everything a question derives from the repository alone goes in: the governed graph's
        view with its PPR matrix and community rows, and the stems' document frequencies. The
        build writes it, so no question pays for any of it. The raw graph's view (read only by
        the raw-graph ablation) is snapshotted by the first question that reads it: building it
        here held both views at once (this step's peak RSS at 22 books: 1,969 MB with both, 1,082
        MB with the governed one)."""
        self.view(PREBUILT_VIEW)
        _write_pickle(_snapshot_path(self.key), (self.passages, self.vectors, self.stem_frequencies()))
        forget_older_versions(self.data_key)

    def stem_frequencies(self) -> tuple[dict[str, int], int]:
        """How many passages hold each word stem, and the number of passages (for IDF)."""
        with self._lock:
            if self._stem_df is None:
                df, self._memo["stems_counted"] = _stem_frequencies(self.passages, self.data_key)
                self._stem_df = (df, len(self.passages))
            return self._stem_df

    @functools.cached_property
    def repo(self):
        from ..repository import Repository

        return Repository.open(self.path)

    @property
    def root(self) -> Path:
        """Where this version's files are read (see repository.PinnedDirectory)."""
        return self.repo.root

    @functools.cached_property
    def bm25(self):
        try:
            return self.repo.lexical_index([p.doc_id for p in self.passages])
        except Exception as exc:
            raise RepositoryError(f"{self.path}: BM25 index is unreadable ({_short(exc)}); rebuild it") from None

    @functools.cached_property
    def key(self) -> str:
        """This repository version and this code (for the pickled snapshot): the data key, then a
        digest of the code."""
        return f"{self.data_key}-{_code_digest()}"

    @functools.cached_property
    def data_key(self) -> str:
        """A digest naming this repository version only: for caches that are pure functions of its
        data (window and community vectors), which a change to the query code must not throw away."""
        from ..repository import MANIFEST

        try:
            stamp = (self.root / MANIFEST).stat().st_mtime_ns
        except OSError:
            stamp = 0
        created = str(self.manifest.get("created", ""))
        version = hashlib.sha256(f"{self.path.resolve()}|{created}|{stamp}".encode()).hexdigest()[:20]
        return f"{_path_key(self.path)}-{version}"  # the repository's path first: see forget_older_versions

    @functools.cached_property
    def token_counts(self) -> np.ndarray:
        """Tokens per passage (the ranker's length feature)."""
        return np.array([p.n_tokens for p in self.passages], np.float64)

    def source_text(self, doc_id: str) -> str:
        """The source document's text, read once per state (a question reads it many times)."""
        text = self._sources.get(doc_id)
        if text is None:
            text = self._sources[doc_id] = self.repo.source_text(doc_id)
        return text

    def passage(self, passage_id: str):
        return self.passages[self.passage_index[passage_id]]

    def place(self, doc_id: str, offset: int):
        """The page and section of an offset of a document (its structure map, read once)."""
        return self.repo.structure(doc_id).place(offset)

    def memo(self, key: Any, make: Callable[[], Any]) -> Any:
        """A value derived from this repository version, computed once and kept with the state
        (sentence-window index, IDF table, …), so it is freed when the state is forgotten."""
        with self._lock:
            if key not in self._memo:
                self._memo[key] = make()
            return self._memo[key]

    def view(self, kind: str) -> GraphView:
        with self._lock:
            if kind not in self._views:
                snapshot = _load_snapshot(f"{self.key}-{kind}")
                if snapshot is not None:
                    self._views[kind] = snapshot
                    return snapshot
                # A view is ~a million small objects that all live on with the state: collections
                # their making triggers walk them again and free nothing. Building the governed
                # view, its PPR matrix and community rows of a 1,000-document library took about
                # twice as long with the collector on (docs/library.md).
                with cyclic_gc_paused():
                    self._views[kind] = self._load_view(kind)
                    self._save_view(kind)
            return self._views[kind]

    def prefetch(self, kind: str) -> None:
        """Start loading, in a background thread, what a first question reads before its own
        work: the graph view `kind` ("none": no view) and the BM25 library's import. A cold
        one-shot question overlaps them with waiting for its encoder; a failure is met again,
        and reported, when the question loads the view itself."""
        def run() -> None:
            try:
                if kind != "none":
                    self.view(kind)
                from ..index.lexical import import_bm25s

                import_bm25s()
            except BaseException:  # noqa: BLE001 - reported by the question's own view()
                pass

        threading.Thread(target=run, name="state-prefetch").start()  # not a daemon: see index.encoder.prefetch_encoder

    def _save_view(self, kind: str) -> None:
        """One file per view, with its PPR matrix, community rows and vectors: a question loads only the
        graph it reads, and builds it once per version."""
        self.ppr_graph(kind)
        self.community_vectors(kind)  # and the community rows it is made from
        try:
            _write_pickle(_snapshot_path(f"{self.key}-{kind}"), self._views[kind])
        except OSError:
            pass  # an unwritable cache dir: this process keeps the view, the next builds it again

    def _load_view(self, kind: str) -> GraphView:
        try:
            # the raw graph's communities are made when first read, from its relations as records;
            # every other view reads its relations as columns only
            store = self.repo.store
            if self.repo.derived(kind):  # made from the mention parts, as records
                graph = self.repo.graph(kind)
                summarise = bool(graph.relations)
            else:
                summarise = not store.count(f"communities_{kind}") and store.count(f"relations_{kind}") > 0
                graph = self.repo.graph(kind, relations=summarise)
            relations = None if summarise else self.repo.relation_table(kind)
            vectors = np.ascontiguousarray(self.repo.entity_vectors(kind), dtype=np.float32)
        except Exception as exc:
            raise RepositoryError(f"{self.path}: the {kind} graph is unreadable ({_short(exc)}); rebuild it") from None
        if summarise:
            from ..graph.summaries import summarised_communities

            graph.communities = summarised_communities(graph, self.passages, self.repo.community_settings())
        return build_view(kind, graph, vectors, n_passages=len(self.passages), dim=self.vectors.shape[1],
                          relations=relations)

    def ppr_graph(self, kind: str):
        """The view's entity–passage PPR matrix (views.build_ppr_graph, walked by ppr.py), built once
        per process."""
        view = self.view(kind)
        if view._ppr is None:
            with self._lock:
                view._ppr = build_ppr_graph(view, self.passage_index, len(self.passages))
        return view._ppr

    def community_rows(self, kind: str) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per community of the view: its passage rows and how central each is to it (built once)."""
        view = self.view(kind)
        if view._community_rows is None:
            with self._lock:
                view._community_rows = community_passage_centrality(view, self.passage_index, self._degrees(kind))
        return view._community_rows

    def _degrees(self, kind: str) -> list[dict[str, float]]:
        """Each community's members' weighted degrees inside it (for its rows and its vector)."""
        return self.memo(("member_degrees", kind), lambda: all_member_degrees(self.view(kind)))

    def community_vectors(self, kind: str) -> np.ndarray:
        """Per community of the view: what it is about (views.composed_community_vectors: from its
        central members' name vectors and its central passages' vectors, no encoder call), made
        once and kept in the view's snapshot."""
        view = self.view(kind)
        if view._community_vectors is None:
            rows = self.community_rows(kind)
            with self._lock:
                view._community_vectors = composed_community_vectors(view, rows, self.vectors, self._degrees(kind))
                self._memo.pop(("member_degrees", kind), None)  # made for the snapshot; not kept
        return view._community_vectors


@functools.lru_cache(maxsize=1)
def _code_digest() -> str:
    """Snapshots hold pickled records: a change to their code must not load stale objects."""
    from .. import __version__

    here = Path(__file__).resolve()
    parts = [__version__, here.read_bytes(), (here.parent / "views.py").read_bytes(),
             (here.parent.parent / "records.py").read_bytes()]
    return hashlib.sha256(b"\x00".join(p if isinstance(p, bytes) else p.encode() for p in parts)).hexdigest()[:12]


def _stem_frequencies(passages: list, data_key: str) -> tuple[dict[str, int], int]:
    """(passages holding each stem, how many passages were stemmed for it). A library's add keeps
    every passage of the version before: its counts (a small file beside its snapshot, with a
    mark of each passage's text) plus the new passages' are this version's, so an add stems what
    it added, not the library (1.5 s of an add at 1,000 documents). Anything else (a removal, a
    passage changed, no earlier counts) counts every passage."""
    from collections import Counter

    from ..text.words import document_frequencies

    marks = {p.passage_id: hashlib.blake2b(p.text.encode(), digest_size=8).digest() for p in passages}
    earlier = _earlier_stem_counts(data_key)
    kept = earlier is not None and earlier[0].items() <= marks.items()
    counted = [p for p in passages if p.passage_id not in earlier[0]] if kept else passages
    df = document_frequencies(p.text for p in counted)
    if kept:
        df = dict(Counter(earlier[1]) + Counter(df))
    try:
        _write_pickle(_stems_path(data_key), (marks, df))
    except OSError:
        pass  # an unwritable cache dir: the next version counts every passage
    return df, len(counted)


def _stems_path(data_key: str) -> Path:
    from ..offline import cache_root

    return cache_root() / "retrieve" / f"{data_key}-stems.pkl"


def _earlier_stem_counts(data_key: str):
    """(passage marks, stem counts) of this repository's newest other version that has them, or None."""
    path_key, current = data_key.split("-", 1)
    found = [p for p in _stems_path(data_key).parent.glob(f"{path_key}-*-stems.pkl") if p.name.split("-")[1] != current]
    newest = max(found, key=_mtime, default=None)
    return _read_pickle(newest) if newest is not None else None


def _snapshot_path(key: str) -> Path:
    from ..offline import cache_root

    return cache_root() / "retrieve" / f"{key}-snapshot.pkl"


def forget_older_versions(data_key: str) -> None:
    """Remove the cache files (snapshots, community vectors) of this repository's older versions
    but the newest one before `data_key`'s: a library grown by adds left one snapshot per version
    (~100 MB each at 1,000 documents; 2 GB in one benchmark's cache). The version before is kept
    for a reader still pinned to it (`.previous`); one older than that that is opened again builds
    its snapshot again. Files other processes have open stay readable until they close them."""
    from ..offline import cache_root

    path_key, current = data_key.split("-", 1)
    folder = cache_root() / "retrieve"
    by_version: dict[str, list[Path]] = {}
    for path in folder.glob(f"{path_key}-*"):
        if path.name.endswith("-by-text.npz"):  # summaries' vectors by text: earlier code's, read no more
            path.unlink(missing_ok=True)
            continue
        by_version.setdefault(path.name.split("-")[1], []).append(path)
    older = sorted((v for v in by_version if v != current),
                   key=lambda v: max(_mtime(p) for p in by_version[v]), reverse=True)
    for version in older[1:]:
        for path in by_version[version]:
            path.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _load_snapshot(key: str):
    return _read_pickle(_snapshot_path(key))


def _read_pickle(path: Path):
    """A cache file's value, or None when it is absent, torn or incompatible (then it is removed:
    what it held is computed again)."""
    import pickle

    if not path.is_file():
        return None
    try:
        with open(path, "rb") as fh, cyclic_gc_paused():
            return pickle.load(fh)
    except Exception:
        path.unlink(missing_ok=True)
        return None


def _write_pickle(path: Path, value: Any) -> None:
    import os
    import pickle

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as fh, cyclic_gc_paused():
        pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)


def _path_key(path: Path) -> str:
    return hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:16]


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or exc.__class__.__name__
    return text if len(text) <= 160 else text[:159] + "…"


_STATES: dict[tuple[str, float], RepoState] = {}
_STATES_LOCK = threading.Lock()


def get_state(path: str | Path) -> RepoState:
    """The cached state of the repository at `path` (reloaded when its manifest changes)."""
    from ..repository import MANIFEST

    from ..objectstore import local_version
    from ..repository import Repository

    path = local_version(path)  # object storage: the latest version, materialised once
    repo = Repository.open(path)  # one-line errors: missing, foreign, newer format, incomplete
    resolved = path.resolve()
    try:
        stamp = (repo.root / MANIFEST).stat().st_mtime
    except OSError:
        stamp = 0.0
    key = (str(resolved), stamp)
    with _STATES_LOCK:
        state = _STATES.get(key)
        if state is None:
            for old in [k for k in _STATES if k[0] == key[0]]:
                del _STATES[old]  # a rebuilt repository replaces its old state
            state = _STATES[key] = RepoState(resolved, repo.manifest, repo)
        return state


def forget_state(path: str | Path) -> None:
    """Drop the cached state of the repository at `path` (its memory goes with the last user)."""
    resolved = str(Path(path).resolve())
    with _STATES_LOCK:
        for key in [k for k in _STATES if k[0] == resolved]:
            del _STATES[key]
