"""Reading the parts of a zipped document (EPUB, DOCX) without trusting the zip: a damaged
archive is one clear line, and parts are unpacked only while their declared sizes stay under a
limit, so a zip bomb is refused rather than inflated."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path
from xml.etree import ElementTree

from ..errors import InputError


class Zipped:
    def __init__(self, path: Path, raw: bytes, kind: str, limit: int):
        """`kind`: what the file should be, with its article ("an EPUB")."""
        self.path, self.limit = path, limit
        self.kind = kind.split(" ", 1)[1]
        self.unpacked = 0
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(raw))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError):
            raise InputError(f"{path}: not {kind}: it is not a zip file (damaged, or another format renamed)") from None
        self.names = set(self.zip.namelist())

    def has(self, name: str) -> bool:
        return name in self.names

    def read(self, name: str) -> bytes:
        if name not in self.names:
            raise InputError(f"{self.path}: damaged {self.kind}: its part '{name}' is missing")
        info = self.zip.getinfo(name)
        self.unpacked += info.file_size
        if self.unpacked > self.limit:
            raise InputError(f"{self.path}: its text unpacks to more than {self.limit / 1024 / 1024:g} MB "
                             "(a zip bomb?); raise chunk.max_unpacked_mb to allow it")
        try:
            return self.zip.read(name)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError, RuntimeError) as exc:
            raise InputError(f"{self.path}: damaged {self.kind}: cannot unpack '{name}' ({_short(exc)})") from None

    def xml(self, name: str) -> ElementTree.Element:
        """A part parsed as XML (the standard library's parser: no external entities, and its
        expat refuses entity expansion bombs)."""
        try:
            return ElementTree.fromstring(self.read(name))
        except ElementTree.ParseError as exc:
            raise InputError(f"{self.path}: damaged {self.kind}: '{name}' is not well-formed XML ({exc})") from None


def _short(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:120] if str(exc) else exc.__class__.__name__
