"""Load input files into SourceDocs: build stage 1.

Accepts plain text and Markdown, PDF (its text layer), EPUB, HTML and Word (.docx) files,
folders of them (recursive, sorted; other files are listed and skipped) or several paths. With
a `root` (the server's --build-root) every file and folder read is resolved and refused unless
its real path lies under the root, at every depth, so a symbolic link cannot lead a build
outside it. Text files are decoded (UTF-8 with or without BOM, then cp1252, then latin-1) and
only newlines are normalised, so every later character offset points into exactly the text a
user can open; the other formats are read into the same kind of text with a structure map of
their pages and sections (document.py and one reader per format). Anything unusable raises
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
from ..structure import Structure
from .document import Decoded
from .gutenberg import find_body

# suffix -> format; the readers are imported only for the formats a build meets
FORMATS = {
    ".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown",
    ".pdf": "pdf", ".epub": "epub", ".html": "html", ".htm": "html", ".xhtml": "html", ".docx": "docx",
}
SUPPORTED_SUFFIXES = tuple(FORMATS)
TEXT_SUFFIXES = tuple(s for s, f in FORMATS.items() if f in ("text", "markdown"))
_SUPPORTED_SHOWN = ".txt, .md, .pdf, .epub, .html, .docx"
_CONVERT_FIRST = {".doc": "save it as .docx", ".rtf": "save it as .docx", ".odt": "save it as .docx",
                  ".mobi": "convert it to .epub", ".azw3": "convert it to .epub", ".djvu": "convert it to .pdf"}

# Control characters that never occur in real text (tab, newlines, form feed are fine).
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_C1_CONTROL = re.compile(r"[\x80-\x9f]")
_SAMPLE_CHARS = 65536
_MAX_CONTROL_RATIO = 0.01
_SLUG_UNSAFE = re.compile(r"[^a-z0-9._-]+")


def load_sources(paths: list[str | Path] | str | Path, settings: ChunkSettings | None = None,
                 root: Path | None = None, password: str | None = None,
                 notes: list[str] | None = None, used_ids: set[str] | None = None) -> list[SourceDoc]:
    """One SourceDoc per input file, in a deterministic order, with unique filesystem-safe ids;
    with `root`, only files whose real path lies under it (see confine). `password` opens
    encrypted PDFs. What the user should know but that does not stop the build (files skipped in
    a folder, PDF pages without text) is appended to `notes`. `used_ids`: ids already taken (a
    library's documents), which the new ones never reuse."""
    settings = settings or ChunkSettings()
    notes = notes if notes is not None else []
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if not paths:
        raise InputError("no input files given")
    skipped: list[Path] = []
    files = collect_files(paths, root, skipped)
    if skipped:
        shown = ", ".join(p.name for p in skipped[:10]) + (f" and {len(skipped) - 10} more" if len(skipped) > 10 else "")
        notes.append(f"skipped {len(skipped)} unsupported file{'s' if len(skipped) > 1 else ''} "
                     f"(not {_SUPPORTED_SHOWN}): {shown}")
    docs: list[SourceDoc] = []
    used_ids = set(used_ids or ())
    for path in files:
        doc_id = unique_doc_id(path, used_ids)
        docs.append(load_file(path, doc_id, settings, password, notes))
    return docs


def collect_files(paths: list[str | Path], root: Path | None = None, skipped: list[Path] | None = None) -> list[Path]:
    """Expand folders (recursively, sorted) and check that every named file is of a supported
    format; files of other formats inside a folder are added to `skipped`. With `root`, each
    path is its real path, checked to lie under the root (see confine)."""
    files: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw).expanduser()
        if root is not None:
            path = confine(path, root)
        elif not path.exists():
            raise InputError(f"{path}: no such file or folder")
        found = _files_in_folder(path, root, skipped) if path.is_dir() else [_checked_file(path)]
        for file in found:
            key = file.resolve()
            if key not in seen:  # the same file named twice (or via its folder) is loaded once
                seen.add(key)
                files.append(file)
    return files


def _checked_file(path: Path) -> Path:
    if not path.is_file():
        raise InputError(f"{path}: not a regular file")
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        hint = f"; {_CONVERT_FIRST[suffix]} first" if suffix in _CONVERT_FIRST else ""
        raise InputError(f"{path}: unsupported file type '{path.suffix or '(none)'}' (use {_SUPPORTED_SHOWN}{hint})")
    return path


def _files_in_folder(folder: Path, root: Path | None = None, skipped: list[Path] | None = None) -> list[Path]:
    """The supported files under `folder`, sorted by their place in it; the others are added to
    `skipped`. Symbolic links to folders are not followed (no loops); with `root`, one whose
    target is outside the root (or that cannot be resolved) is refused all the same, and each
    file is read at its real path once that is checked to lie inside."""
    found: list[tuple[tuple[str, ...], Path]] = []
    for here, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if root is not None:
            for name in dirs:
                if os.path.islink(os.path.join(here, name)):
                    confine(Path(here) / name, root)
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = Path(here) / name
            if Path(name).suffix.lower() in FORMATS:
                found.append((path.relative_to(folder).parts, path if root is None else confine(path, root)))
            elif skipped is not None:
                skipped.append(path)
    if not found:
        raise InputError(f"{folder}: folder contains no supported files ({_SUPPORTED_SHOWN})")
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


def load_file(path: Path, doc_id: str, settings: ChunkSettings, password: str | None = None,
              notes: list[str] | None = None) -> SourceDoc:
    raw = read_bytes_checked(path, settings.max_file_mb)
    fmt = FORMATS.get(path.suffix.lower(), "text")
    decoded = read_format(fmt, path, raw, settings, password)
    text = decoded.text
    if fmt in ("text", "markdown"):
        check_text(path, text, decoded.encoding, settings.max_line_chars)
    else:
        check_extracted(path, text, fmt, settings.max_line_chars)
    start, end = find_body(text)
    if start >= end:
        raise InputError(f"{path}: no text left after removing the Project Gutenberg header and licence")
    if notes is not None:
        notes.extend(f"{path.name}: {note}" for note in decoded.notes)
    structure = Structure(path.name, fmt, decoded.pages, decoded.headings).within(start, end)
    return SourceDoc(
        doc_id=doc_id, path=str(path.resolve()), text=text, sha256=hashlib.sha256(raw).hexdigest(),
        encoding=decoded.encoding, content_start=start, content_end=end, structure=structure,
    )


def read_format(fmt: str, path: Path, raw: bytes, settings: ChunkSettings, password: str | None) -> Decoded:
    """The text and structure of a file of format `fmt`. The readers name what they recognise
    as wrong; anything else a malformed file makes a parser raise is one line too."""
    try:
        return _read_format(fmt, path, raw, settings, password)
    except (InputError, MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 — a damaged file must not end in a traceback
        detail = str(exc).splitlines()[0][:120] if str(exc) else ""
        raise InputError(f"{path}: cannot read this {fmt.upper()} file, it is damaged or malformed "
                         f"({exc.__class__.__name__}{': ' + detail if detail else ''})") from None


def _read_format(fmt: str, path: Path, raw: bytes, settings: ChunkSettings, password: str | None) -> Decoded:
    """Each reader is imported only when a file of its format comes."""
    if fmt == "pdf":
        from .pdf import read_pdf

        return read_pdf(path, raw, password)
    if fmt == "epub":
        from .epub import read_epub

        return read_epub(path, raw, _unpacked_limit(settings))
    if fmt == "docx":
        from .docx import read_docx

        return read_docx(path, raw, _unpacked_limit(settings))
    if fmt == "html":
        from .html import read_html

        return read_html(path, raw)
    text, encoding = decode_text(path, raw)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if fmt == "markdown":
        from .markdown import markdown_headings

        return Decoded(text, encoding, headings=markdown_headings(text))
    return Decoded(text, encoding)


def _unpacked_limit(settings: ChunkSettings) -> int:
    """Bytes a zipped format (EPUB, DOCX) may unpack to: a zip bomb is refused, not inflated."""
    return int(settings.max_unpacked_mb * 1024 * 1024)


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
    return raw


def decode_text(path: Path, raw: bytes) -> tuple[str, str]:
    """(text, encoding): UTF-16 only with a BOM, else UTF-8 (BOM stripped), cp1252, latin-1."""
    if b"\x00" in raw and not raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise InputError(f"{path}: looks like a binary file (contains NUL bytes), not text")
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


def check_extracted(path: Path, text: str, fmt: str, max_line_chars: int) -> None:
    """The text read out of a PDF, EPUB, HTML or Word file: there must be some, and it must not
    be one endless line."""
    if not text.strip():
        raise InputError(f"{path}: no text in this {fmt.upper()} file (an empty document)")
    longest = _line_longer_than(text, max_line_chars)
    if longest is not None:
        raise InputError(f"{path}: a paragraph longer than {max_line_chars:,} characters "
                         "(not prose; raise chunk.max_line_chars to allow it)")


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
