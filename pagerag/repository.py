"""The built repository on disk R(D) = (T(D), G(D), P, b): layout, atomic publish, open/validate.

    R/
      manifest.json        sources, settings, versions, counts, raw vs governed statistics
      sources/<doc>.txt    decoded, newline-normalised source text (all offsets point into it)
      sources/<doc>.structure.json   its structure map: the original file's name and format, its
                           pages and headings as offsets into <doc>.txt (structure.py); a
                           repository built before it existed has none: no page, no section
      tables/              LanceDB: passages (+vectors), entities_/relations_/communities_
                           {governed,raw}, names (every entity name's vector, appended per
                           add; format 3 on: before, each entity table held its own);
                           provenance lives in passage_ids. The raw graph's tables are empty
                           when the manifest's `raw_graph` is "mention parts": it is made again
                           from extract/ when first read (spaCy extraction only)
      extract/<doc>.json.gz  each document's mention part (what spaCy read in it)
      lexical/<doc>.npz    BM25: each document's passages' term counts (format 2 on; scored
                           together as one bm25s index at query time, index.lexical)
      bm25/                format 1 only: one bm25s index; document i = passage row i

A build writes everything into a staging directory beside R, validates it, and only then swaps it
in (renameat2 RENAME_EXCHANGE on Linux), so an interrupted or failed build leaves R untouched.
The version it replaced moves to `.<R>.versions/<n>/` (n: publish order), where a reader that
opened it finishes; `pagerag gc` (versions.py) removes old versions no reader holds.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from .errors import RepositoryError
from .records import Community, Entity, Graph, Passage, Relation, set_place
from .structure import Structure

# 3: name vectors in one `names` table; the raw graph made from the mention parts when read
# 2: BM25 as one shard per document in lexical/ (1: one bm25s index in bm25/); both still read
FORMAT_VERSION = 3
MANIFEST = "manifest.json"
EXTRACT_DIR = "extract"
NAMES_TABLE = "names"
RAW_FROM_MENTIONS = "mention parts"  # the manifest's `raw_graph` when the raw graph is not stored
STRUCTURE_SUFFIX = ".structure.json"
GRAPH_KINDS = ("governed", "raw")
STORE_BACKEND = "lancedb"


def mention_part_path(root: Path, doc_id: str) -> Path:
    """Where a version keeps a document's mention part (what spaCy read in it)."""
    return root / EXTRACT_DIR / f"{doc_id}.json.gz"


# --------------------------------------------------------------------------------------------
# Reading


class Repository:
    """A published repository, opened read-only. Tables load lazily and are cached."""

    def __init__(self, path: Path, manifest: dict[str, Any], pinned: "PinnedDirectory | None" = None):
        self.path = path  # as the user named it (messages)
        self.manifest = manifest
        self._pinned = pinned
        # where every file is read: the directory as it was opened, even once a newer version
        # has been swapped in at `path` (a reader sees one version, never a mix)
        self.root = pinned.root if pinned is not None else path
        # per-instance caches (not functools.lru_cache on the methods: a global cache holds the
        # instance, and with it its passages, vectors and BM25 index, after the caller lets go)
        self._graphs: dict[str, Graph] = {}
        self._entity_vectors: dict[str, np.ndarray] = {}
        self._source_texts: dict[str, str] = {}
        self._structures: dict[str, Structure] = {}

    @classmethod
    def open(cls, path: str | Path) -> "Repository":
        from .objectstore import local_version

        path = local_version(path)  # a repository on object storage: its latest version, materialised
        pinned = PinnedDirectory.of(path)
        manifest = read_manifest(path, pinned.root if pinned else path)
        version = manifest.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise RepositoryError(
                f"{path}: repository format {version} was written by a newer pagerag "
                f"(this one reads format {FORMAT_VERSION}); upgrade pagerag or rebuild"
            )
        root = pinned.root if pinned else path
        for part in ("tables", "sources", "bm25" if version < 2 else "lexical"):
            if not (root / part).is_dir():
                raise RepositoryError(f"{path}: repository is incomplete ('{part}/' is missing); rebuild it")
        return cls(path, manifest, pinned)

    @functools.cached_property
    def store(self):
        from .index.store import open_store

        return open_store(self.manifest.get("store", STORE_BACKEND), self.root / "tables")

    @functools.cached_property
    def passages(self) -> list[Passage]:
        """The passages, each with its page and section from its document's structure map."""
        passages = [Passage(**row) for row in self.store.read("passages")]
        for p in passages:
            set_place(p, self.structure(p.doc_id).place(p.start))
        return passages

    @functools.cached_property
    def passage_index(self) -> dict[str, int]:
        return {p.passage_id: i for i, p in enumerate(self.passages)}

    @functools.cached_property
    def passage_vectors(self) -> np.ndarray:
        return self.store.vectors("passages")

    @functools.cached_property
    def bm25(self):
        """The lexical index: the documents' BM25 shards, or a format-1 repository's one bm25s index."""
        return self.lexical_index([p.doc_id for p in self.passages])

    def lexical_index(self, doc_ids: list[str]):
        """The lexical index over passages of these documents, in this order. A question passes the
        doc ids of its snapshot's passages: reading them from the table here imported LanceDB
        (1.7 s of a 2.3 s cold ask on Moby Dick) for nothing else."""
        from .index.lexical import LEXICAL_DIR, BM25Index, ShardedBM25

        if not (self.root / LEXICAL_DIR).is_dir():
            return BM25Index.load(self.root / "bm25")
        try:
            return ShardedBM25.load(self.root / LEXICAL_DIR, doc_ids)
        except (OSError, ValueError) as exc:  # a shard missing, unreadable or of another length
            raise RepositoryError(f"{self.path}: the BM25 shards do not match the passages ({exc})") from None

    def derived(self, kind: str) -> bool:
        """Whether the graph `kind` is not stored but made from the mention parts when read: the
        raw graph of a spaCy-extracted version since format 3. It is a function of those parts
        (build_raw_graph over them, in document-id order), which an add writes only for its own
        documents; storing it rewrote ~440k rows at every add into 1,000 documents."""
        return kind == "raw" and self.manifest.get("raw_graph") == RAW_FROM_MENTIONS

    def graph(self, kind: str = "governed", relations: bool = True) -> Graph:
        """The graph as records; relations=False leaves its relations out (relation_table reads
        them as columns)."""
        if kind not in GRAPH_KINDS:
            raise ValueError(f"graph kind must be one of {GRAPH_KINDS}")
        if kind in self._graphs:
            return self._graphs[kind]
        if self.derived(kind):
            self._graphs[kind] = self.graph_from_mentions()
            return self._graphs[kind]
        graph = Graph(
            entities=[Entity(**r) for r in self.store.iter_rows(f"entities_{kind}")],
            relations=[Relation(**r) for r in self.store.iter_rows(f"relations_{kind}")] if relations else [],
            communities=[Community(**r) for r in self.store.iter_rows(f"communities_{kind}")],
        )
        if relations:
            self._graphs[kind] = graph
        return graph

    def relation_table(self, kind: str = "governed"):
        """The graph's relations as columns in row order, evidence left as JSON text (what a
        question's graph view holds: graph.relation_table)."""
        from .graph.relation_table import COLUMNS, RelationTable

        if kind not in GRAPH_KINDS:
            raise ValueError(f"graph kind must be one of {GRAPH_KINDS}")
        if self.derived(kind):
            return RelationTable.of(self.graph(kind).relations)
        columns = self.store.columns(f"relations_{kind}", [*COLUMNS, "row"], decode=False)
        order = sorted(range(len(columns["row"])), key=columns["row"].__getitem__)
        return RelationTable({c: [columns[c][i] for i in order] for c in COLUMNS})

    def graph_from_mentions(self) -> Graph:
        """The raw graph as the writer built it: build_raw_graph over every document's mention
        part with this version's extraction settings (its communities are found by the reader,
        as a stored raw graph's are). Not cached: graph("raw") keeps it."""
        from .graph.extract_nlp import build_raw_graph, merge_mentions, read_mention_part
        from .memory import cyclic_gc_paused
        from .settings import ExtractSettings

        given = self.manifest.get("settings", {}).get("extract", {})
        settings = ExtractSettings(**{k: v for k, v in given.items() if k in ExtractSettings.model_fields})
        parts = {}
        with cyclic_gc_paused():  # every document's sentences, as small lists (see memory.py)
            for doc_id in sorted({p.doc_id for p in self.passages}):
                try:
                    parts[doc_id] = read_mention_part(mention_part_path(self.root, doc_id))[1]
                except (OSError, ValueError) as exc:
                    raise RepositoryError(f"{self.path}: the raw graph's mention part of {doc_id} is unreadable "
                                          f"({exc.__class__.__name__}); rebuild") from None
            return build_raw_graph(merge_mentions(parts), self.passages, settings)

    def entity_vectors(self, kind: str = "governed") -> np.ndarray:
        """The graph's name vectors, a row per entity in table order."""
        if kind not in self._entity_vectors:
            self._entity_vectors[kind] = self._read_entity_vectors(kind)
        return self._entity_vectors[kind]

    @property
    def embedding_dim(self) -> int:
        return int(self.manifest.get("embedding_dim") or self.passage_vectors.shape[1])

    def _read_entity_vectors(self, kind: str) -> np.ndarray:
        if not self.names_table:  # before format 3 each entity table held its names' vectors
            return self.store.vectors(f"entities_{kind}") if self.store.count(f"entities_{kind}") \
                else np.zeros((0, self.embedding_dim), dtype=np.float32)
        if self.derived(kind):
            names = [e.name for e in self.graph(kind).entities]
        else:
            names = self._names_in_row_order(f"entities_{kind}")
        known, vectors = self.name_vectors()
        row = {name: i for i, name in enumerate(known)}
        missing = next((n for n in names if n not in row), None)
        if missing is not None:
            raise RepositoryError(f"{self.path}: no name vector for the {kind} entity {missing!r}; rebuild")
        return vectors[[row[n] for n in names]] if names else np.zeros((0, self.embedding_dim), dtype=np.float32)

    @property
    def names_table(self) -> bool:
        return int(self.manifest.get("format_version") or 1) >= 3

    def name_vectors(self) -> tuple[list[str], np.ndarray]:
        """Every name in the names table and its vector, in table order (names of documents
        removed since stay: a name's vector depends on the name alone)."""
        names = self._names_in_row_order(NAMES_TABLE)
        return names, self.store.vectors(NAMES_TABLE) if names else np.zeros((0, self.embedding_dim), np.float32)

    def _names_in_row_order(self, table: str) -> list[str]:
        """A table's `name` column in its rows' order (the store may return them in another)."""
        columns = self.store.columns(table, ["name", "row"])
        return [n for _, n in sorted(zip(columns["row"], columns["name"]))]

    def source_text(self, doc_id: str) -> str:
        if doc_id not in self._source_texts:
            self._source_texts[doc_id] = (self.root / "sources" / f"{doc_id}.txt").read_text(encoding="utf-8")
        return self._source_texts[doc_id]

    def structure(self, doc_id: str) -> Structure:
        """The document's structure map; an empty one (no pages, no sections) when the repository
        was built before there were any."""
        if doc_id not in self._structures:
            self._structures[doc_id] = self._read_structure(doc_id)
        return self._structures[doc_id]

    def _read_structure(self, doc_id: str) -> Structure:
        path = self.root / "sources" / f"{doc_id}{STRUCTURE_SUFFIX}"
        try:
            return Structure.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return Structure()
        except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
            raise RepositoryError(f"{path}: unreadable structure map ({exc.__class__.__name__}); rebuild") from None

    def stats(self) -> dict[str, Any]:
        return dict(self.manifest.get("stats", {}))

    def community_settings(self):
        """The Leiden and summary settings this version was built with (its manifest's; today's
        defaults for any it does not name): the raw graph's communities are found with them when
        first read."""
        from .settings import CommunitySettings

        given = self.manifest.get("settings", {}).get("community", {})
        return CommunitySettings(**{k: v for k, v in given.items() if k in CommunitySettings.model_fields})


def document_list(manifest: dict[str, Any], passages: list[Passage] | None = None) -> list[dict[str, Any]]:
    """The library's documents: id, title, file, format, words, passages, sha256, when added (a
    repository built before libraries has no title or date: the file name and the build's date)."""
    counts: dict[str, int] = {}
    for p in passages or ():
        counts[p.doc_id] = counts.get(p.doc_id, 0) + 1
    out = []
    for s in manifest.get("sources", []):
        out.append({"doc_id": s["doc_id"], "title": s.get("title") or Path(s.get("path", "")).stem,
                    "file": Path(s.get("path", "")).name, "format": s.get("format", "text"),
                    "words": s.get("words"), "passages": s.get("passages", counts.get(s["doc_id"])),
                    "sha256": s.get("sha256"), "added": s.get("added") or manifest.get("created")})
    return out


class PinnedDirectory:
    """A repository directory held open (Linux): `root` (/proc/self/fd/N) reaches the version that
    was opened even after a build, add or remove swaps a new one in at the same path. The
    publisher moves the version it replaced to `.<repo>.versions/`, and the descriptor holds a
    shared lock on it (flock): `pagerag gc` removes only versions it can lock exclusively, so a
    reader's version stays whole until the reader lets it go (the kernel drops the lock when the
    descriptor closes or the process dies)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.root = Path(f"/proc/self/fd/{fd}")

    @classmethod
    def of(cls, path: Path) -> "PinnedDirectory | None":
        if not Path("/proc/self/fd").is_dir():
            return None
        for _ in range(PIN_ATTEMPTS):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                return None  # missing or not a directory: read_manifest names the problem
            if hold_version(fd, path):
                return cls(fd)
            os.close(fd)  # swapped out (and perhaps being collected) between open and lock: again
        raise RepositoryError(f"{path}: the repository kept changing while it was being opened; try again")

    def __del__(self, _close=os.close) -> None:  # bound now: at interpreter exit `os` may be gone
        try:
            _close(self.fd)
        except OSError:
            pass


PIN_ATTEMPTS = 5


def hold_version(fd: int, path: Path) -> bool:
    """Take a shared lock on the directory open at `fd`; True when it is still the one published
    at `path`. Checked after locking: a version opened just before a publish swapped it out could
    otherwise be collected between the open and the lock."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # gc holds it: it is being removed
    except OSError:
        pass  # a file system without flock: read unprotected, as before
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except OSError:
        return False


def read_manifest(path: Path, root: Path | None = None) -> dict[str, Any]:
    if not path.exists():
        raise RepositoryError(f"{path}: no repository here (run `pagerag build … --repo {path}` first)")
    if not path.is_dir():
        raise RepositoryError(f"{path}: is a file, not a repository directory")
    manifest_path = (root or path) / MANIFEST
    if not manifest_path.is_file():
        raise RepositoryError(f"{path}: not a PAGE-RAG repository (no {MANIFEST})")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RepositoryError(f"{manifest_path}: unreadable manifest ({exc.__class__.__name__})") from None
    if not isinstance(manifest, dict):
        raise RepositoryError(f"{manifest_path}: manifest is not a JSON object")
    return manifest


# --------------------------------------------------------------------------------------------
# Writing


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    tmp.replace(path)


# --------------------------------------------------------------------------------------------
# Publishing


def check_target(repo: Path) -> None:
    """Refuse, before any work, a --repo we must not or cannot replace."""
    if repo.exists() and not repo.is_dir():
        raise RepositoryError(f"{repo}: exists and is a file, not a repository directory")
    if repo.is_dir() and any(repo.iterdir()):
        manifest = read_manifest(repo)  # raises: a non-empty directory that is not a repository
        version = manifest.get("format_version")
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise RepositoryError(
                f"{repo}: repository format {version} was written by a newer pagerag; refusing to overwrite it"
            )
    parent = repo.resolve().parent
    if not parent.is_dir():
        raise RepositoryError(f"{repo}: parent directory {parent} does not exist")
    # os.access says yes to root everywhere; only really creating something tells the truth.
    probe = parent / f".{repo.name}.probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise RepositoryError(f"{repo}: cannot write in {parent} ({exc.strerror or exc})") from None


def link_tree(src: Path, dst: Path) -> None:
    """`dst` as a copy of `src` made of hard links (a copy where linking fails): a new version
    shares the previous one's unchanged files. Nothing is ever rewritten in place in a
    repository (LanceDB adds files, the rest is written to a temporary name and renamed), so
    changing the copy never changes the original."""
    for here, _dirs, names in os.walk(src):
        target = dst / Path(here).relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for name in names:
            try:
                os.link(Path(here) / name, target / name)
            except OSError:
                shutil.copy2(Path(here) / name, target / name)


class WriterLock:
    """One writer at a time per repository: an exclusive lock on `.<repo>.lock` beside it, held
    by a build, an add or a remove from start to publish. A second writer waits (wait=True) or
    fails at once with one line naming the holder. The kernel drops the lock when its holder
    dies, so a killed writer never leaves the repository locked."""

    def __init__(self, repo: Path, wait: bool = False):
        repo = repo.resolve()
        self.path = repo.parent / f".{repo.name}.lock"
        self.repo = repo
        self.wait = wait
        self._fh = None

    def __enter__(self) -> "WriterLock":
        import fcntl

        while True:
            fh = open(self.path, "a+")
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
            except BlockingIOError:
                fh.seek(0)
                holder = fh.read().strip() or "?"
                fh.close()
                raise RepositoryError(f"{self.repo}: another writer (pid {holder}) is changing this repository; "
                                      "try again when it has finished (or pass --wait)") from None
            if self._still_linked(fh):
                break
            fh.close()  # the holder removed the file as it let go (see __exit__): lock the new one
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh
        return self

    def __exit__(self, *exc) -> None:
        if self._fh is not None:
            if not self.repo.exists():  # a first build that failed or was cancelled leaves nothing behind
                self.path.unlink(missing_ok=True)
            self._fh.close()  # closing releases the lock
            self._fh = None

    def _still_linked(self, fh) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            return False


def staging_dir(repo: Path, pid: int | None = None) -> Path:
    """Where the build process `pid` (default: this one) stages `repo` before publishing it."""
    repo = repo.resolve()
    return repo.parent / f".{repo.name}.staging-{os.getpid() if pid is None else pid}"


def clean_stale_staging(repo: Path) -> None:
    """Remove staging dirs of builds that died (their pid is gone)."""
    repo = repo.resolve()
    for candidate in repo.parent.glob(f".{repo.name}.staging-*"):
        pid = candidate.name.rsplit("-", 1)[-1]
        # our own leftover from an earlier build in this process, or a dead builder's
        if pid.isdigit() and (int(pid) == os.getpid() or not pid_alive(int(pid))):
            shutil.rmtree(candidate, ignore_errors=True)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def publish(staging: Path, repo: Path) -> None:
    """Make `staging` the repository at `repo` in one step; the one it replaces becomes an old
    version (`pagerag gc`, or the add's own collection, removes it once no reader holds it)."""
    repo = repo.resolve()
    if repo.exists() and repo.is_dir() and not any(repo.iterdir()):
        repo.rmdir()
    if not repo.exists():
        os.rename(staging, repo)
        return
    _exchange(staging, repo)  # now `staging` holds the old repository
    try:
        os.rename(staging, next_version_dir(repo))
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)


def versions_dir(repo: Path) -> Path:
    """Where a repository's old versions live: `.<repo>.versions/` beside it."""
    repo = repo.resolve()
    return repo.parent / f".{repo.name}.versions"


def next_version_dir(repo: Path) -> Path:
    """`.<repo>.versions/<n>`, n one past the newest there (publish order; a build restarts the
    library's own version number, so that number cannot name them). Called under the writer lock."""
    folder = versions_dir(repo)
    folder.mkdir(exist_ok=True)
    taken = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
    return folder / f"{max(taken, default=0) + 1:06d}"


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> None:
    """Atomically swap two directories (Linux renameat2); fall back to two renames elsewhere."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
        if result == 0:
            return
    # Fallback: a short window where `b` is absent; `Repository.open` names the situation clearly.
    backup = b.with_name(b.name + ".old")
    shutil.rmtree(backup, ignore_errors=True)
    os.rename(b, backup)
    os.rename(a, b)
    os.rename(backup, a)
