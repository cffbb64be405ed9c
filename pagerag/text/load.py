"""Load input files into SourceDocs: build stage 1.

Accepts .txt/.md files, folders of them (recursive, sorted) or several paths. With a `root`
(the server's --build-root) every file and folder read is resolved and refused unless its real
path lies under the root, at every depth, so a symbolic link cannot lead a build outside it.
Text is decoded
(UTF-8 with or without BOM, then cp1252, then latin-1) and only newlines are normalised, so every
later character offset points into exactly the text a user can open. Anything unusable raises
`InputError` with one line naming the file and the problem.
"""
from __future__ import annotations

import codecs
import hashlib
import os
import re
import unicodedata
from pathlib import Path

from ..errors import InputError
from ..records import SourceDoc
from ..settings import ChunkSettings
from .gutenberg import find_body

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".text")

# Control characters that never occur in real text (tab, newlines, form feed are fine).
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_C1_CONTROL = re.compile(r"[\x80-\x9f]")
_SAMPLE_CHARS = 65536
_MAX_CONTROL_RATIO = 0.01
_SLUG_UNSAFE = re.compile(r"[^a-z0-9._-]+")


def load_sources(paths: list[str | Path] | str | Path, settings: ChunkSettings | None = None,
                 root: Path | None = None) -> list[SourceDoc]:
    """One SourceDoc per input file, in a deterministic order, with unique filesystem-safe ids;
    with `root`, only files whose real path lies under it (see confine)."""
    settings = settings or ChunkSettings()
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise InputError("no input files given")
    files = collect_files(paths, root)
    docs: list[SourceDoc] = []
    used_ids: set[str] = set()
    for path in files:
        doc_id = unique_doc_id(path, used_ids)
        docs.append(load_file(path, doc_id, settings))
    return docs


def collect_files(paths: list[str | Path], root: Path | None = None) -> list[Path]:
    """Expand folders (recursively, sorted) and check that every named file is usable text.
    With `root`, each path is its real path, checked to lie under the root (see confine)."""
    files: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw).expanduser()
        if root is not None:
            path = confine(path, root)
        elif not path.exists():
            raise InputError(f"{path}: no such file or folder")
        found = _files_in_folder(path, root) if path.is_dir() else [_checked_file(path)]
        for file in found:
            key = file.resolve()
            if key not in seen:  # the same file named twice (or via its folder) is loaded once
                seen.add(key)
                files.append(file)
    return files


def _checked_file(path: Path) -> Path:
    if not path.is_file():
        raise InputError(f"{path}: not a regular file")
    if path.suffix.lower() not in TEXT_SUFFIXES:
        raise InputError(f"{path}: unsupported file type '{path.suffix or '(none)'}' (use .txt or .md)")
    return path


def _files_in_folder(folder: Path, root: Path | None = None) -> list[Path]:
    """The text files under `folder`, sorted by their place in it. Symbolic links to folders are
    not followed (no loops); with `root`, one whose target is outside the root (or that cannot
    be resolved) is refused all the same, and each file is read at its real path once that is
    checked to lie inside."""
    found: list[tuple[tuple[str, ...], Path]] = []
    for here, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if root is not None:
            for name in dirs:
                if os.path.islink(os.path.join(here, name)):
                    confine(Path(here) / name, root)
        for name in sorted(names):
            if not name.startswith(".") and Path(name).suffix.lower() in TEXT_SUFFIXES:
                path = Path(here) / name
                found.append((path.relative_to(folder).parts, path if root is None else confine(path, root)))
    if not found:
        raise InputError(f"{folder}: folder contains no .txt or .md files")
    return [path for _, path in sorted(found)]


def confine(path: Path, root: Path) -> Path:
    """The real path of `path` (every symbolic link resolved), if it lies under `root`; else
    InputError naming `path` relative to the root, never where its link points."""
    root = root.resolve()
    shown = _relative(path, root)
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(f"{shown}: a symbolic link to nothing") from None
        raise InputError(f"{shown}: no such file or folder") from None
    except (OSError, RuntimeError):  # ELOOP: a link that leads back to itself
        raise InputError(f"{shown}: a symbolic link loop") from None
    if real != root and root not in real.parents:
        raise OutsideRootError(f"{shown}: leads outside the build root (a symbolic link); refused")
    return real


class OutsideRootError(InputError):
    """A path whose real location is outside the build root."""


def _relative(path: Path, root: Path) -> str:
    try:
        return str(Path(os.path.abspath(path)).relative_to(root))
    except ValueError:
        return path.name


def unique_doc_id(path: Path, used: set[str]) -> str:
    """A stable id from the file stem: lower-case ASCII, [a-z0-9._-]; '-2', '-3' on collisions."""
    ascii_stem = unicodedata.normalize("NFKD", path.stem).encode("ascii", "ignore").decode()
    base = _SLUG_UNSAFE.sub("-", ascii_stem.lower()).strip("-._") or "doc"
    doc_id, n = base, 1
    while doc_id in used:
        n += 1
        doc_id = f"{base}-{n}"
    used.add(doc_id)
    return doc_id


def load_file(path: Path, doc_id: str, settings: ChunkSettings) -> SourceDoc:
    raw = read_bytes_checked(path, settings.max_file_mb)
    text, encoding = decode_text(path, raw)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    check_text(path, text, encoding, settings.max_line_chars)
    start, end = find_body(text)
    if start >= end:
        raise InputError(f"{path}: no text left after removing the Project Gutenberg header and licence")
    return SourceDoc(
        doc_id=doc_id, path=str(path.resolve()), text=text, sha256=hashlib.sha256(raw).hexdigest(),
        encoding=encoding, content_start=start, content_end=end,
    )


def read_bytes_checked(path: Path, max_file_mb: float) -> bytes:
    """The file's bytes; size is checked first so a huge file is refused without reading it."""
    try:
        size = path.stat().st_size
        if size > max_file_mb * 1024 * 1024:
            raise InputError(
                f"{path}: file is too large ({size / 1024 / 1024:.1f} MB > limit {max_file_mb:g} MB; "
                "raise chunk.max_file_mb to allow it)"
            )
        if size == 0:
            raise InputError(f"{path}: file is empty")
        raw = path.read_bytes()
    except PermissionError:
        raise InputError(f"{path}: cannot read file (permission denied)") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read file ({exc.strerror or exc})") from None
    if b"\x00" in raw and not raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise InputError(f"{path}: looks like a binary file (contains NUL bytes), not text")
    return raw


def decode_text(path: Path, raw: bytes) -> tuple[str, str]:
    """(text, encoding): UTF-16 only with a BOM, else UTF-8 (BOM stripped), cp1252, latin-1."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return raw.decode("utf-16"), "utf-16"
        except UnicodeDecodeError:
            raise InputError(f"{path}: not decodable as text (broken UTF-16)") from None
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError:
            continue
        if encoding == "utf-8-sig" and not raw.startswith(codecs.BOM_UTF8):
            encoding = "utf-8"  # name what the file is, not the codec that tolerates a BOM
        return text, encoding
    text = raw.decode("latin-1")  # never fails: every byte is a character
    if _control_ratio(text, _C1_CONTROL) > _MAX_CONTROL_RATIO:
        raise InputError(f"{path}: not decodable as text (not UTF-8, cp1252 or latin-1)")
    return text, "latin-1"


def check_text(path: Path, text: str, encoding: str, max_line_chars: int) -> None:
    if not text.strip():
        raise InputError(f"{path}: file contains only whitespace")
    if _control_ratio(text, _CONTROL) > _MAX_CONTROL_RATIO:
        raise InputError(f"{path}: looks like a binary file (many control characters), not text")
    longest = _line_longer_than(text, max_line_chars)
    if longest is not None:
        raise InputError(
            f"{path}: line {longest} is longer than {max_line_chars:,} characters "
            "(not prose; raise chunk.max_line_chars to allow it)"
        )


def _control_ratio(text: str, pattern: re.Pattern[str]) -> float:
    """Share of control characters in samples from the start, middle and end (cheap on big files)."""
    if len(text) <= 3 * _SAMPLE_CHARS:
        samples = [text]
    else:
        mid = len(text) // 2
        samples = [text[:_SAMPLE_CHARS], text[mid : mid + _SAMPLE_CHARS], text[-_SAMPLE_CHARS:]]
    bad = sum(len(pattern.findall(s)) for s in samples)
    return bad / max(1, sum(len(s) for s in samples))


def _line_longer_than(text: str, limit: int) -> int | None:
    """1-based number of the first line longer than `limit`, or None.

    Jumps to the last newline inside each window of limit+1 characters, so the scan costs
    O(len(text)) in C however many lines there are.
    """
    pos, n = 0, len(text)
    while n - pos > limit:
        newline = text.rfind("\n", pos, pos + limit + 1)
        if newline == -1:
            return text.count("\n", 0, pos) + 1
        pos = newline + 1
    return None
