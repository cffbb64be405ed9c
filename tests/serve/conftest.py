"""Fixtures for the server tests: a real `pagerag serve` process on a free port, serving a copy
of the session's training-book repository (`printer`, extractive backend, so no LLM is needed)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from serving import ServerProcess


@pytest.fixture(scope="session")
def build_root(tmp_path_factory, printer_excerpt) -> Path:
    """The folder builds may read: a variant of the excerpt whose every offset differs."""
    root = tmp_path_factory.mktemp("build-root")
    text = printer_excerpt.read_text(encoding="utf-8")
    (root / "books").mkdir()
    (root / "books" / "printer_variant.txt").write_text("A NOTE ON THIS EDITION\n\nPrinted for the tests.\n\n" + text,
                                                        encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def served(printer_repo, build_root, tmp_path_factory):
    """`pagerag serve` with two repositories: `printer` (the shared test repository, never
    rebuilt) and `swap` (a copy of it that the swap test rebuilds)."""
    repos = tmp_path_factory.mktemp("served")
    swap = repos / "swap.rag"
    shutil.copytree(printer_repo, swap)
    args = ["--repo", f"printer={printer_repo}", "--repo", str(swap), "--llm", "extractive",
            "--build-root", str(build_root), "--repos-dir", str(repos), "--max-upload-mb", "0.2"]
    with ServerProcess(args) as server:
        server.swap_repo = swap
        server.repos_dir = repos
        yield server
