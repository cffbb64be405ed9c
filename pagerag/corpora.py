"""Named public corpora and question sets (corpora/catalog.toml): list, fetch, resolve by name.

`fetch(name)` puts an entry's files into the cache (`<PAGERAG_CACHE_DIR>/corpora/<path>`),
downloading `url` (or the `member` of a zip at `url`), or copying from a mirror directory laid
out like the catalog's paths (`--mirror DIR`; `$PAGERAG_DATA_DIR` is one). Every file is checked
against its sha256 before it is moved into place, so the cache never holds a wrong byte.

`corpus:NAME` then works wherever a path is expected: `resolve_corpus_paths` (build) and
`resolve_question_files` (eval) look in the cache first, then in `$PAGERAG_DATA_DIR` read in
place (a verified mirror needs no copy), else say which `pagerag corpus fetch` to run.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .errors import ConfigError, InputError
from .resources import sha256_of

PREFIX = "corpus:"
BUILDABLE_KINDS = ("book",)
CHUNK = 1 << 20


@dataclass(frozen=True)
class CatalogFile:
    path: str  # relative: where it sits in a mirror and in the cache
    sha256: str
    bytes: int | None = None
    url: str = ""
    member: str = ""  # file inside the zip archive at `url`


@dataclass
class CatalogEntry:
    name: str
    section: str  # corpus | questions
    title: str
    format: str
    licence: str
    source: str
    files: list[CatalogFile]
    kind: str = ""  # corpus: book | passages
    question_sets: list[str] = field(default_factory=list)  # corpus: names of [questions.*]
    corpus: str = ""  # questions: the corpus it asks about


@dataclass
class Catalog:
    path: Path
    entries: dict[str, CatalogEntry]

    def get(self, name: str) -> CatalogEntry:
        if name not in self.entries:
            near = [n for n in self.entries if name.lower() in n or n in name.lower()]
            hint = f" (did you mean {', '.join(near[:3])}?)" if near else " (see `pagerag corpus list`)"
            raise InputError(f"unknown corpus '{name}'{hint}")
        return self.entries[name]

    def question_sets_of(self, entry: CatalogEntry) -> list[CatalogEntry]:
        if entry.section == "questions":
            return [entry]
        return [self.get(name) for name in entry.question_sets]

    def corpus_of(self, entry: CatalogEntry) -> CatalogEntry:
        return entry if entry.section == "corpus" else self.get(entry.corpus)


# --------------------------------------------------------------------------------------------
# Catalog


def default_catalog_path() -> Path:
    from .resources import resource_dir

    return resource_dir("corpora") / "catalog.toml"


def load_catalog(path: str | Path | None = None) -> Catalog:
    path = Path(path) if path else default_catalog_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the corpus catalog: {exc}") from None
    entries: dict[str, CatalogEntry] = {}
    for section in ("corpus", "questions"):
        for name, raw in (data.get(section) or {}).items():
            if name in entries:
                raise ConfigError(f"{path}: '{name}' is defined twice (corpus and question-set names share one namespace)")
            entries[name] = _entry(path, section, name, raw)
    catalog = Catalog(path, entries)
    _check_links(catalog)
    return catalog


def _entry(path: Path, section: str, name: str, raw: dict) -> CatalogEntry:
    try:
        files = [CatalogFile(path=f["path"], sha256=f["sha256"].lower(), bytes=f.get("bytes"), url=f.get("url", ""),
                             member=f.get("member", "")) for f in raw["files"]]
        return CatalogEntry(name=name, section=section, title=raw["title"], format=raw["format"],
                            licence=raw["licence"], source=raw.get("source", ""), files=files, kind=raw.get("kind", ""),
                            question_sets=list(raw.get("question_sets", [])), corpus=raw.get("corpus", ""))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: [{section}.{name}] lacks or mistypes {exc}") from None


def _check_links(catalog: Catalog) -> None:
    for entry in catalog.entries.values():
        for linked in entry.question_sets + ([entry.corpus] if entry.corpus else []):
            if linked not in catalog.entries:
                raise ConfigError(f"{catalog.path}: [{entry.section}.{entry.name}] names unknown entry '{linked}'")


# --------------------------------------------------------------------------------------------
# Where files are


def cache_dir() -> Path:
    from .offline import cache_root

    return cache_root() / "corpora"


def default_mirrors() -> list[Path]:
    """Directories laid out like the catalog paths that are read in place: $PAGERAG_DATA_DIR."""
    data = os.environ.get("PAGERAG_DATA_DIR", "")
    return [Path(data)] if data and Path(data).is_dir() else []



def _verified(path: Path, item: CatalogFile) -> bool:
    if not path.is_file() or (item.bytes is not None and path.stat().st_size != item.bytes):
        return False
    return sha256_of(path) == item.sha256


def locate(item: CatalogFile, mirrors: list[Path] | None = None) -> Path | None:
    """The verified file: in the cache, else in a mirror (read in place); None when absent."""
    for root in [cache_dir()] + list(default_mirrors() if mirrors is None else mirrors):
        candidate = root / item.path
        if _verified(candidate, item):
            return candidate
    return None


def entry_status(entry: CatalogEntry, mirrors: list[Path] | None = None) -> str:
    """fetched | mirror | missing (all files in the cache / all available, some from a mirror / not)."""
    in_cache = [_verified(cache_dir() / f.path, f) for f in entry.files]
    if all(in_cache):
        return "fetched"
    return "mirror" if all(locate(f, mirrors) for f in entry.files) else "missing"


def entry_files(entry: CatalogEntry, mirrors: list[Path] | None = None) -> list[Path]:
    paths = []
    for item in entry.files:
        found = locate(item, mirrors)
        if found is None:
            raise InputError(f"corpus '{entry.name}' is not fetched ({item.path} is not in the cache or a mirror): run "
                             f"`pagerag corpus fetch {entry.name}` (add --mirror DIR on an offline machine)")
        paths.append(found)
    return paths


# --------------------------------------------------------------------------------------------
# Fetch

Report = Callable[[str], None]


def fetch(name: str, mirror: str | Path | None = None, catalog: Catalog | None = None,
          report: Report | None = None, timeout_s: float = 60.0) -> list[Path]:
    """Put the files of `name` (and, for a corpus, of its question sets) into the cache,
    verified; return their cache paths."""
    catalog = catalog or load_catalog()
    entry = catalog.get(name)
    entries = [entry] + ([q for q in catalog.question_sets_of(entry) if q is not entry] if entry.section == "corpus" else [])
    say = report or (lambda message: None)
    paths: list[Path] = []
    for current in entries:
        for item in current.files:
            paths.append(_fetch_file(current, item, Path(mirror) if mirror else None, say, timeout_s))
    return paths


def _fetch_file(entry: CatalogEntry, item: CatalogFile, mirror: Path | None, say: Report, timeout_s: float) -> Path:
    target = cache_dir() / item.path
    if _verified(target, item):
        say(f"{item.path}: already in the cache (sha256 ok)")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        if mirror is not None:
            _copy_from_mirror(mirror, item, tmp)
            origin = f"copied from {mirror}"
        elif item.url:
            _download(item, tmp, timeout_s)
            origin = f"downloaded from {item.url}" + (f" ({item.member})" if item.member else "")
        else:
            raise InputError(f"{entry.name}: {item.path} has no download URL (it is derived from {entry.source or 'its source'}); "
                             "copy it from a mirror: pagerag corpus fetch NAME --mirror DIR")
        actual = sha256_of(tmp)
        if actual != item.sha256:
            raise InputError(f"{item.path}: sha256 mismatch (expected {item.sha256[:12]}…, got {actual[:12]}…); "
                             "nothing was written to the cache")
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    say(f"{item.path}: {origin}, sha256 ok")
    return target


def _copy_from_mirror(mirror: Path, item: CatalogFile, tmp: Path) -> None:
    source = mirror / item.path
    if not source.is_file():
        raise InputError(f"{source}: not in the mirror (a mirror is laid out like the catalog paths, e.g. $PAGERAG_DATA_DIR)")
    shutil.copyfile(source, tmp)


def _download(item: CatalogFile, tmp: Path, timeout_s: float) -> None:
    import urllib.error
    import urllib.request

    try:
        if item.member:
            _download_member(item, tmp, timeout_s)
            return
        with urllib.request.urlopen(item.url, timeout=timeout_s) as response, tmp.open("wb") as sink:
            shutil.copyfileobj(response, sink, CHUNK)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InputError(f"cannot download {item.url}: {reason} (offline? use --mirror DIR)") from None


def _download_member(item: CatalogFile, tmp: Path, timeout_s: float) -> None:
    """Fetch the zip once into cache/downloads, then extract the member (the member is what is
    verified; the archive itself has no catalogued checksum)."""
    import urllib.request
    import zipfile

    archive = cache_dir() / "downloads" / hashlib.sha256(item.url.encode()).hexdigest()[:16] / Path(item.url).name
    if not archive.is_file():
        archive.parent.mkdir(parents=True, exist_ok=True)
        part = archive.with_name(archive.name + f".{os.getpid()}.part")
        try:
            with urllib.request.urlopen(item.url, timeout=timeout_s) as response, part.open("wb") as sink:
                shutil.copyfileobj(response, sink, CHUNK)
            part.replace(archive)
        finally:
            part.unlink(missing_ok=True)
    try:
        with zipfile.ZipFile(archive) as bundle, bundle.open(item.member) as source, tmp.open("wb") as sink:
            shutil.copyfileobj(source, sink, CHUNK)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise InputError(f"{item.url}: cannot extract {item.member}: {exc}") from None


# --------------------------------------------------------------------------------------------
# corpus:NAME


def is_corpus_ref(arg: str) -> bool:
    return str(arg).startswith(PREFIX)


def resolve_corpus_paths(args: list[str], catalog: Catalog | None = None, mirrors: list[Path] | None = None) -> list[Path]:
    """Build inputs: each `corpus:NAME` becomes the (verified) text files of that corpus (a
    question-set name means the corpus it asks about); anything else is returned as a Path."""
    out: list[Path] = []
    for arg in args:
        if not is_corpus_ref(arg):
            out.append(Path(arg))
            continue
        catalog = catalog or load_catalog()
        entry = catalog.corpus_of(catalog.get(str(arg)[len(PREFIX):]))
        if entry.kind not in BUILDABLE_KINDS:
            raise InputError(f"corpus '{entry.name}' is a {entry.kind} corpus ({entry.format}) for RCS calibration; "
                             "`pagerag build` reads books (text files)")
        out.extend(entry_files(entry, mirrors))
    return out


@dataclass
class QuestionFile:
    path: Path
    name: str  # the catalog question set, or the file name
    corpus: str = ""  # the catalog corpus it asks about ("" for a plain file)


def resolve_question_files(args: list[str], catalog: Catalog | None = None,
                           mirrors: list[Path] | None = None) -> list[QuestionFile]:
    """Eval inputs: `corpus:NAME` (a question set, or a corpus = all its question sets) or files."""
    out: list[QuestionFile] = []
    for arg in args:
        if not is_corpus_ref(arg):
            out.append(QuestionFile(Path(arg), Path(arg).name))
            continue
        catalog = catalog or load_catalog()
        entry = catalog.get(str(arg)[len(PREFIX):])
        sets = catalog.question_sets_of(entry)
        if not sets:
            raise InputError(f"corpus '{entry.name}' has no question sets in the catalog")
        for qs in sets:
            if qs.format not in ("pagerag-jsonl", "graphrag-bench-json"):
                raise InputError(f"question set '{qs.name}' is {qs.format} (gold passage ids for RCS calibration), "
                                 "not a question set `pagerag eval` scores")
            files = [p for p in entry_files(qs, mirrors) if p.suffix in (".json", ".jsonl")]
            out.extend(QuestionFile(p, qs.name, qs.corpus) for p in files)
    return out
