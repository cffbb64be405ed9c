"""Shared fixtures. Data sets are found through PAGERAG_DATA_DIR (default: ../shared/data beside
the checkout); tests that need them skip with a reason when they are absent."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _find_data_dir() -> Path | None:
    configured = os.environ.get("PAGERAG_DATA_DIR")
    if configured:
        return Path(configured) if Path(configured).is_dir() else None
    default = REPO_ROOT.parent / "shared" / "data"
    return default if default.is_dir() else None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    found = _find_data_dir()
    if found is None:
        pytest.skip("data sets not found: set PAGERAG_DATA_DIR to the shared data directory (e.g. ../shared/data)")
    return found


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the test session's caches (tiktoken files, LLM responses) out of the user's home."""
    os.environ.setdefault("PAGERAG_CACHE_DIR", str(tmp_path_factory.mktemp("pagerag-cache")))
