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


# A real repository, built once per test session from an excerpt of A Christmas Carol with the
# real embedding model, spaCy and LanceDB.

EXCERPT_CHARS = 60_000  # ~10k words: Marley, Scrooge, the Cratchits; builds in seconds


@pytest.fixture(scope="session")
def carol_excerpt(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = data_dir / "books" / "christmas_carol.txt"
    if not source.is_file():
        pytest.skip(f"{source} not found in PAGERAG_DATA_DIR")
    text = source.read_text(encoding="utf-8")
    cut = text.find("\n\n", EXCERPT_CHARS)
    path = tmp_path_factory.mktemp("books") / "carol_excerpt.txt"
    path.write_text(text[: cut if cut > 0 else EXCERPT_CHARS], encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def carol_parts(carol_excerpt: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three documents cut from the Carol excerpt at paragraph breaks (a.txt, b.txt, c.txt): a
    library's documents in the library, Ray and object-storage tests."""
    text = carol_excerpt.read_text(encoding="utf-8-sig")
    folder = tmp_path_factory.mktemp("parts")
    cuts = [0] + [text.find("\n\n", n) for n in (20_000, 40_000)] + [len(text)]
    out = {}
    for name, lo, hi in zip("abc", cuts, cuts[1:]):
        out[name] = folder / f"{name}.txt"
        out[name].write_text(text[lo:hi].strip() + "\n", encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def carol_a_repo(carol_parts: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library of carol_parts' a.txt, built once per session with the default settings (no
    environment): tests that grow or change it work on a copy (shutil.copytree)."""
    return _build_once([carol_parts["a"]], tmp_path_factory.mktemp("repos") / "a.rag")


@pytest.fixture(scope="session")
def carol_ab_repo(carol_parts: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A library of carol_parts' a.txt and b.txt built together, once per session (as carol_a_repo)."""
    return _build_once([carol_parts["a"], carol_parts["b"]], tmp_path_factory.mktemp("repos") / "ab.rag")


def _build_once(paths: list[Path], repo: Path) -> Path:
    from pagerag.build import build_repository
    from pagerag.settings import load_settings

    build_repository(paths, repo, load_settings(environ={}), show_progress=False)
    return repo


@pytest.fixture(scope="session")
def carol_repo(carol_excerpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pagerag.build import build_repository
    from pagerag.settings import load_settings

    repo = tmp_path_factory.mktemp("repos") / "carol.rag"
    build_repository([carol_excerpt], repo, load_settings(environ={}), show_progress=False)
    return repo


# A repository of a training book's opening (GraphRAG-Bench Novel-10146, a printer's
# reminiscences of early St. Paul), for tests of the fitted decision: their questions come from the
# book's written training set (qa/train), never from a DEV or test set: helpers/questions.py.

TRAINING_BOOK = "Novel-10146"
TRAINING_EXCERPT_CHARS = 70_000


@pytest.fixture(scope="session")
def printer_excerpt(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The training book's opening as printer_excerpt.txt (the book is one line: cut at 70,000)."""
    source = data_dir / "graphrag-bench-novel" / "texts" / f"{TRAINING_BOOK}.txt"
    if not source.is_file():
        pytest.skip(f"{source} not found in PAGERAG_DATA_DIR")
    text = source.read_text(encoding="utf-8")
    cut = text.find("\n\n", TRAINING_EXCERPT_CHARS)
    path = tmp_path_factory.mktemp("books") / "printer_excerpt.txt"
    path.write_text(text[: cut if cut > 0 else TRAINING_EXCERPT_CHARS], encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def printer_repo(printer_excerpt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pagerag.build import build_repository
    from pagerag.settings import load_settings

    repo = tmp_path_factory.mktemp("repos") / "printer.rag"
    build_repository([printer_excerpt], repo, load_settings(environ={}), show_progress=False)
    return repo


@pytest.fixture(scope="session")
def printer_questions(data_dir: Path) -> dict[str, dict]:
    """The training book's written questions by id (qa/train/Novel-10146.qa.jsonl)."""
    import json

    path = data_dir / "qa" / "train" / f"{TRAINING_BOOK}.qa.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found in PAGERAG_DATA_DIR")
    return {row["id"]: row for row in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if row}

# A repository built once per session from one manual as a PDF, an EPUB, a Word file and a web
# page (made with the writers of the test extra), each saying a codeword of its own in section
# "3 Setup › 3.2 Installing" — on the PDF's last page (helpers/documents.format_manual).


@pytest.fixture(scope="session")
def formats_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("reportlab", reason="the format tests need the writers of the test extra: pip install -e '.[test]'")
    from helpers.documents import format_manual, write_docx, write_epub, write_html, write_pdf

    folder = tmp_path_factory.mktemp("manuals")
    write_pdf(folder / "manual.pdf", format_manual("pdf"), title="Widget Manual", labels=True)
    write_epub(folder / "guide.epub", format_manual("epub"), title="Widget Guide")
    write_docx(folder / "notes.docx", format_manual("docx"))
    write_html(folder / "page.html", format_manual("html"), title="Widget Page")
    (folder / "cover.png").write_bytes(b"\x89PNG\r\n")
    return folder


@pytest.fixture(scope="session")
def formats_repo(formats_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pagerag.build import build_repository
    from pagerag.settings import load_settings

    repo = tmp_path_factory.mktemp("repos") / "manuals.rag"
    build_repository([formats_folder], repo, load_settings(environ={}), show_progress=False)
    return repo
