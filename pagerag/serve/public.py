"""What a client sees of the server's files: a document's name and id, never a server path.

The library's records carry the absolute path of each source file (the CLI shows it to the local
user, whose files they are). Over HTTP and MCP the client is someone else: citations, evidence,
repositories, build jobs and error messages name a document by its file name and `doc_id`, so
they do not tell a client how the server's disk is laid out.

The files a client is meant to see, the web page's (`STATIC`), and the response header naming
the repository version that answered (`VERSION_HEADER`) are named here too, below the app and
its routers, which all read them.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

STATIC = Path(__file__).resolve().parent / "static"
VERSION_HEADER = "X-PageRAG-Version"
PATH_KEYS = ("file", "path")
# an absolute path in a message: up to whitespace, a quote or a bracket
_ABSOLUTE = re.compile(r"(?<![\w.:/~-])(/[^\s'\"()\[\]{}<>,;]+)")


def document_name(path: str) -> str:
    """The file name of a source path (POSIX or Windows)."""
    return re.split(r"[\\/]", path.rstrip("\\/"))[-1] or path


def without_paths(value: Any) -> Any:
    """`value` (a record's dict) with every `file`/`path` string reduced to its file name."""
    if isinstance(value, dict):
        return {k: document_name(v) if k in PATH_KEYS and isinstance(v, str) else without_paths(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [without_paths(v) for v in value]
    return value


def answer(answer) -> dict[str, Any]:
    """The `pagerag ask --json` object as a client sees it: citations name their document."""
    data = answer.to_dict()
    for out, citation in zip(data["citations"], answer.citations):
        out["doc_id"] = citation.doc_id
    return without_paths(data)


def retrieval(retrieval) -> dict[str, Any]:
    """The `pagerag retrieve --json` object as a client sees it."""
    return without_paths(retrieval.to_dict())


def scrub(message: str) -> str:
    """`message` with each absolute path on this machine replaced by its last part: a library
    error names the file, not where it lives. A path is on this machine when it, or a folder
    it lies in (below /), exists — also a file deleted since, such as an upload. Paths that are
    not (an endpoint such as /v1/builds) are left as they are."""
    return _ABSOLUTE.sub(_shorten, message)


def _shorten(match: re.Match) -> str:
    token = match.group(1)
    path = token.rstrip(".:")
    return document_name(path) + token[len(path):] if _on_this_machine(path) else token


def _on_this_machine(path: str) -> bool:
    if os.path.exists(path):
        return True
    folder = os.path.dirname(path.rstrip("/"))
    while folder not in ("", "/"):
        if os.path.isdir(folder):
            return True
        folder = os.path.dirname(folder)
    return False
