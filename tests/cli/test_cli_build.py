"""The CLI through its entry point: bad input gets one clear line and a non-zero exit, never a
traceback, and never changes an existing repository; a killed build leaves the old one intact."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pagerag", *args], capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_help_lists_commands():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("build", "inspect", "export", "config"):
        assert command in result.stdout


def test_missing_path(tmp_path: Path):
    missing = tmp_path / "nope.txt"
    assert_one_line_error(run_cli("build", str(missing), "--repo", str(tmp_path / "r")), str(missing))


def test_directory_without_text_files(tmp_path: Path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "image.png").write_bytes(b"\x89PNG\r\n")
    assert_one_line_error(run_cli("build", str(folder), "--repo", str(tmp_path / "r")), str(folder))


@pytest.mark.parametrize(
    "name,content",
    [
        ("empty.txt", b""),
        ("blank.txt", b"   \n\t\n  "),
        ("binary.txt", bytes(range(256)) * 64),
    ],
)
def test_unusable_files(tmp_path: Path, name: str, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    result = run_cli("build", str(path), "--repo", str(tmp_path / "r"))
    assert_one_line_error(result, name)
    assert not (tmp_path / "r").exists()


def test_huge_single_line_file_is_refused_quickly(tmp_path: Path):
    path = tmp_path / "one-line.txt"
    with open(path, "wb") as fh:
        chunk = b"word " * 200_000  # 1 MB
        for _ in range(200):
            fh.write(chunk)
    started = time.perf_counter()
    result = run_cli("build", str(path), "--repo", str(tmp_path / "r"))
    assert_one_line_error(result, "one-line.txt")
    assert time.perf_counter() - started < 60


def test_repo_that_is_a_file(tmp_path: Path, carol_excerpt: Path):
    target = tmp_path / "repo-file"
    target.write_text("not a repository")
    assert_one_line_error(run_cli("build", str(carol_excerpt), "--repo", str(target)), "is a file")
    assert target.read_text() == "not a repository"


def test_repo_that_is_an_unrelated_directory(tmp_path: Path, carol_excerpt: Path):
    target = tmp_path / "photos"
    target.mkdir()
    (target / "holiday.jpg").write_bytes(b"jpeg")
    assert_one_line_error(run_cli("build", str(carol_excerpt), "--repo", str(target)), "not a PAGE-RAG repository")
    assert (target / "holiday.jpg").read_bytes() == b"jpeg"


def test_repo_in_unwritable_place(tmp_path: Path, carol_excerpt: Path):
    # /proc refuses new directories even to root, unlike chmod'ed folders
    assert_one_line_error(run_cli("build", str(carol_excerpt), "--repo", "/proc/pagerag-test.rag"), "pagerag-test.rag")


def test_inspect_missing_repository(tmp_path: Path):
    assert_one_line_error(run_cli("inspect", "--repo", str(tmp_path / "none")), "no repository")


def test_unknown_pipeline(tmp_path: Path, carol_excerpt: Path):
    assert_one_line_error(run_cli("build", str(carol_excerpt), "--repo", str(tmp_path / "r"), "--pipeline", "nope"), "unknown pipeline")


def test_config_show_lists_every_setting_with_help():
    result = run_cli("config", "show", "--json")
    assert result.returncode == 0
    settings = json.loads(result.stdout)
    assert settings["chunk"]["tokens"] == 200 and settings["pipeline"] == "full"
    table = run_cli("config", "show", "--pipeline", "passages-only", "--set", "chunk.tokens=300")
    assert table.returncode == 0
    assert "passages-only" in table.stdout and "300" in table.stdout


def test_env_overrides_settings(monkeypatch):
    env = dict(os.environ, PAGERAG_CHUNK__TOKENS="123", PAGERAG_RETRIEVE__BUDGET_TOKENS="999")
    result = subprocess.run([sys.executable, "-m", "pagerag", "config", "show", "--json"], capture_output=True, text=True, env=env)
    settings = json.loads(result.stdout)
    assert settings["chunk"]["tokens"] == 123 and settings["retrieve"]["budget_tokens"] == 999


@pytest.mark.slow
def test_build_inspect_export_through_cli(tmp_path: Path, carol_excerpt: Path):
    repo = tmp_path / "carol.rag"
    result = run_cli("build", str(carol_excerpt), "--repo", str(repo), "--quiet")
    assert result.returncode == 0, result.stderr
    assert "passages" in result.stdout
    stats = json.loads(run_cli("inspect", "--repo", str(repo), "--json").stdout)
    expected = {"passages", "entities_raw", "entities", "relations_raw", "relations", "communities_raw",
                "communities", "isolated_raw", "isolated", "build_seconds", "build_tokens", "words",
                "versions_kept", "bytes_kept", "raw_graph"}
    assert set(stats) == expected and stats["raw_graph"] == "mention parts"
    assert stats["passages"] > 0 and stats["entities"] <= stats["entities_raw"]
    assert stats["versions_kept"] == 1 and stats["bytes_kept"] > 0
    assert stats["communities"] > 0 and stats["communities_raw"] is None  # the raw graph's: found when first read
    table = run_cli("inspect", "--repo", str(repo))
    assert table.returncode == 0 and "governed" in table.stdout and "versions kept" in table.stdout
    assert "on demand" in table.stdout and "mention parts" in table.stdout
    graphml = tmp_path / "g.graphml"
    result = run_cli("export", "--repo", str(repo), "--graphml", str(graphml))
    assert result.returncode == 0, result.stderr
    import networkx as nx

    graph = nx.read_graphml(graphml)
    assert graph.number_of_nodes() == stats["entities"]
    raw = tmp_path / "raw.graphml"
    assert run_cli("export", "--repo", str(repo), "--graphml", str(raw), "--raw").returncode == 0
    raw_graph = nx.read_graphml(raw)  # every raw entity in a level-0 community, found for the export
    assert raw_graph.number_of_nodes() == stats["entities_raw"]
    assert all(data.get("community") for _, data in raw_graph.nodes(data=True))


@pytest.mark.slow
def test_kill_during_build_keeps_old_repository_and_resume_finishes(tmp_path: Path, carol_repo: Path, data_dir: Path):
    repo = tmp_path / "book.rag"
    shutil.copytree(carol_repo, repo)
    before = (repo / "manifest.json").read_bytes()
    book = data_dir / "books" / "christmas_carol.txt"
    cache = tmp_path / ".book.rag.cache"
    proc = subprocess.Popen([sys.executable, "-m", "pagerag", "build", str(book), "--repo", str(repo), "--quiet"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not list(cache.glob("embed-*.pkl")):
        time.sleep(0.05)
    assert proc.poll() is None, "build finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert (repo / "manifest.json").read_bytes() == before
    from pagerag.validation import validate_repository

    validate_repository(repo)  # the old repository still opens, whole
    result = run_cli("build", str(book), "--repo", str(repo), "--quiet")
    assert result.returncode == 0, result.stderr
    assert "resumed" in result.stdout and "embed" in result.stdout
    assert json.loads((repo / "manifest.json").read_text())["sources"][0]["path"].endswith("christmas_carol.txt")
    assert not list(tmp_path.glob(".book.rag.staging-*"))



# What a library's `logging.warning(...)` leaves on a bare root logger (ONNX Runtime's quantiser
# during a fresh install's first build, which exports the model): a stderr handler that prints
# every record reaching it, DEBUG ones included. The build runs through the CLI after it.
WITH_A_ROOT_HANDLER = ("import logging, sys\nlogging.basicConfig()\nfrom pagerag.cli import main\n"
                       "sys.argv = ['pagerag', *sys.argv[1:]]\nmain()\n")


@pytest.fixture(scope="module")
def small_library(carol_excerpt: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """Two documents of a few paragraphs each, with file names as long as people's, built
    through the CLI (after a library gave the root logger a handler): the repository and the
    build's output."""
    text = carol_excerpt.read_text(encoding="utf-8-sig")
    folder = tmp_path_factory.mktemp("small-library")
    books = folder / "books"
    books.mkdir()
    (books / "christmas_carol_stave_one.txt").write_text(text[: text.find("\n\n", 3_000)], encoding="utf-8")
    (books / "Marley's Ghost (Stave 1, part 2).txt").write_text(
        text[text.find("\n\n", 20_000) : text.find("\n\n", 23_000)], encoding="utf-8")
    repo = folder / "small.rag"
    result = subprocess.run([sys.executable, "-c", WITH_A_ROOT_HANDLER, "build", str(books), "--repo", str(repo)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return repo, result


def test_a_build_prints_no_library_debug_logs(small_library):
    _, result = small_library
    assert "passages" in result.stdout
    assert "DEBUG" not in result.stdout + result.stderr, result.stderr


def test_docs_fits_80_columns_with_whole_ids(small_library):
    repo, _ = small_library
    env = {**os.environ, "COLUMNS": "80"}
    table = subprocess.run([sys.executable, "-m", "pagerag", "docs", "--repo", str(repo)], capture_output=True,
                           text=True, env=env, timeout=120)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, table.stdout
    listed = json.loads(run_cli("docs", "--repo", str(repo), "--json").stdout)["documents"]
    assert len(listed) == 2
    for doc in listed:  # one line each, its id whole (what `pagerag remove` takes); no sha256
        assert sum(line.startswith(doc["doc_id"] + " ") for line in lines) == 1, table.stdout
        assert doc["sha256"][:8] not in table.stdout
    wide = subprocess.run([sys.executable, "-m", "pagerag", "docs", "--repo", str(repo), "--wide"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert wide.returncode == 0, wide.stderr
    for doc in listed:  # --wide: the file, the whole sha256 and the time added, on the document's line
        line = next(line for line in wide.stdout.splitlines() if line.startswith(doc["doc_id"] + " "))
        assert doc["file"] in line and doc["sha256"] in line and doc["added"] in line and doc["title"] in line


FORK_AFTER_LANCEDB = ("import multiprocessing, sys\n"
                      "if sys.argv[1] == 'pagerag':\n    import pagerag\n"
                      "import lancedb\n"
                      "child = multiprocessing.get_context('fork').Process(target=int)\n"
                      "child.start(); child.join()\n")


def test_a_fork_after_lancedb_prints_no_warning_once_pagerag_is_imported():
    """A build forks spaCy's workers after LanceDB was imported; LanceDB's fork hook warned about it
    in every build's output (the README's own command showed it twice). With pagerag imported the
    warning is filtered; the control, without it, shows the same fork does warn."""
    runs = {who: subprocess.run([sys.executable, "-c", FORK_AFTER_LANCEDB, who], capture_output=True, text=True,
                                timeout=120) for who in ("pagerag", "control")}
    assert all(run.returncode == 0 for run in runs.values()), {w: r.stderr for w, r in runs.items()}
    assert "fork support" not in runs["pagerag"].stderr, runs["pagerag"].stderr
    assert "fork support is experimental" in runs["control"].stderr
