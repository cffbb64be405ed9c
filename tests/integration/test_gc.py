"""`pagerag gc` on local disk: old versions beyond the last N go unless a reader holds them; a
reader of a kept version reads it whole during gc; asks running beside adds and gcs never fail; a
killed gc leaves the current version whole; an add collects beyond library.keep_versions; bad
input is one line and a non-zero exit."""
from __future__ import annotations

import gc as garbage
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.library import small_documents
from helpers.processes import finish, watch
from pagerag.repository import Repository, WriterLock, versions_dir
from pagerag.validation import validate_repository
from pagerag.settings import load_settings
from pagerag.versions import Kept, collect, kept, old_versions, tree_bytes

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def docs(carol_excerpt, tmp_path_factory) -> dict[str, Path]:
    return small_documents(carol_excerpt, tmp_path_factory.mktemp("docs"))


def settings(keep: int = 10):
    return load_settings(environ={}, overrides={"library": {"keep_versions": keep}})


def numbers(repo: Path) -> list[int]:
    return [v.number for v in old_versions(repo)]


def doc_ids(repo: Repository) -> set[str]:
    return {p.doc_id for p in repo.passages}


def reads_whole(repo: Repository) -> bool:
    """Every kind of file of the version read back: passages and vectors, BM25, both graphs, the
    sources their spans point into."""
    passages = repo.passages
    return (all(repo.source_text(p.doc_id)[p.start:p.end] == p.text for p in passages)
            and repo.passage_vectors.shape[0] == len(passages) == repo.bm25.n_docs
            and bool(repo.graph("governed").entities) and bool(repo.graph("raw").relations))


def test_gc_keeps_the_last_n_and_what_readers_hold(docs, tmp_path):
    from pagerag.build import add_documents, build_repository, remove_documents

    repo = tmp_path / "lib.rag"
    build_repository([docs["a"]], repo, settings(), show_progress=False)
    reader = Repository.open(repo)  # holds version 1; reads nothing yet
    add_documents([docs["b"]], repo, settings(), show_progress=False)
    add_documents([docs["c"]], repo, settings(), show_progress=False)
    remove_documents(["b"], repo, settings(), show_progress=False)
    assert numbers(repo) == [3, 2, 1]
    dirs = [repo, *(v.path for v in old_versions(repo))]
    counted_twice = sum(f.stat().st_size for d in dirs for f in d.rglob("*") if f.is_file())
    before = kept(repo)
    # versions share their unchanged files (hard links): counted once
    assert before.versions == 4 and tree_bytes([repo]) < before.bytes < counted_twice

    done = collect(repo, keep=2)
    assert (done.kept, done.held, done.removed) == ([4, 3, 1], [1], [2])
    assert numbers(repo) == [3, 1] and done.bytes_freed > 0
    assert kept(repo) == Kept(3, done.bytes_kept) and done.bytes_kept == before.bytes - done.bytes_freed
    assert doc_ids(reader) == {"a"} and reads_whole(reader)  # after the gc, the reader's version is whole
    assert doc_ids(validate_repository(repo)) == {"a", "c"}

    del reader
    garbage.collect()
    done = collect(repo, keep=2)
    assert (done.removed, done.held) == ([1], [])
    done = collect(repo, keep=1)
    assert done.removed == [3] and done.kept == [4]
    assert numbers(repo) == [] and [p.name for p in versions_dir(repo).iterdir()] == []
    assert kept(repo) == Kept(1, tree_bytes([repo]))
    assert reads_whole(validate_repository(repo))


def test_an_add_collects_beyond_keep_versions_but_not_what_a_reader_holds(docs, tmp_path):
    from pagerag.build import add_documents, build_repository, remove_documents

    repo = tmp_path / "lib.rag"
    build_repository([docs["a"]], repo, settings(2), show_progress=False)
    add_documents([docs["b"]], repo, settings(2), show_progress=False)
    add_documents([docs["c"]], repo, settings(2), show_progress=False)
    assert numbers(repo) == [2]  # the default: the current version and the one before
    reader = Repository.open(repo)  # version 3
    add_documents([docs["d"]], repo, settings(1), show_progress=False)
    assert numbers(repo) == [3]  # 2 went; 3 stays while its reader reads
    assert doc_ids(reader) == {"a", "b", "c"} and reads_whole(reader)
    del reader
    garbage.collect()
    remove_documents(["d"], repo, settings(1), show_progress=False)
    # 3 (let go) and 4 (the remove's own base, which it let go of before collecting) are gone
    assert numbers(repo) == []
    assert doc_ids(validate_repository(repo)) == {"a", "b", "c"}


ASKER = r'''
import json, random, sys, time
from pathlib import Path
from pagerag.api import PageRAG
repo, stop = sys.argv[1], Path(sys.argv[2])
random.seed(int(sys.argv[3]))
done, errors, versions = 0, [], set()
print("ready", flush=True)
while not stop.exists():
    try:
        rag = PageRAG(repo, llm="extractive")  # a version opened, its files read lazily...
        time.sleep(random.uniform(0.5, 3.0))  # ...by a slow caller, while versions are published and collected
        versions.add(rag.state.manifest["library"]["version"])
        found = rag.retrieve("Who was Marley?")
        assert found.evidence, "no evidence"
        for e in found.evidence:
            assert rag.state.repo.source_text(e.doc_id)[e.start:e.end] == e.text, e.passage_id
        answer = rag.ask("Who was Marley?")
        assert answer.decision in ("answered", "refused") and (answer.citations or answer.reason)
        done += 1
        print("asked", flush=True)
    except Exception as exc:
        errors.append(f"{exc.__class__.__name__}: {exc}")
print(json.dumps({"asks": done, "errors": errors, "versions": sorted(versions)}), flush=True)
'''


def test_asks_during_adds_and_gcs_never_fail(docs, tmp_path):
    from pagerag.build import add_documents, build_repository, remove_documents

    repo = tmp_path / "lib.rag"
    build_repository([docs["a"], docs["b"]], repo, settings(1), show_progress=False)
    stop = tmp_path / "stop"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGERAG_LLM__")}
    askers = [subprocess.Popen([sys.executable, "-c", ASKER, str(repo), str(stop), str(seed)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    for asker in askers:
        assert asker.stdout.readline().strip() == "ready"
    lines = [watch(asker) for asker in askers]
    held, cycles, deadline = [], 0, time.time() + 900
    try:
        while (cycles < 2 or min(seen.count("asked") for seen in lines) < 3) and time.time() < deadline:
            # every publish collects down to the current version (keep 1), and so does every gc
            add_documents([docs["c"]], repo, settings(1), show_progress=False)
            held += [collect(repo, keep=1).held for _ in range(3)]
            remove_documents(["c"], repo, settings(1), show_progress=False)
            held += [collect(repo, keep=1).held for _ in range(3)]
            cycles += 1
    finally:
        stop.touch()
        for asker in askers:
            finish(asker)
    reports = [json.loads(seen[-1]) for seen in lines]
    print("asks:", reports, "held by askers during gc:", held)
    for report, asker in zip(reports, askers):
        assert report["errors"] == [], asker.stderr.read()[-800:]
        assert report["asks"] >= 3 and len(report["versions"]) >= 2  # its asks spanned publishes
    assert any(held)  # a gc met a version an asker was reading, and left it
    collect(repo, keep=1)
    assert numbers(repo) == []  # once the askers have gone, so have the versions they held
    assert doc_ids(validate_repository(repo)) == {"a", "b"}



SLOW_GC = r'''
import os, sys, time
unlink = os.unlink
def slowly(*a, **k):
    time.sleep(0.2)
    return unlink(*a, **k)
os.unlink = slowly
from pagerag.versions import collect
collect(sys.argv[1], keep=1)
'''


def test_a_killed_gc_leaves_the_current_version_whole(docs, tmp_path):
    from pagerag.build import add_documents, build_repository

    repo = tmp_path / "lib.rag"
    build_repository([docs["a"]], repo, settings(), show_progress=False)
    add_documents([docs["b"]], repo, settings(), show_progress=False)
    add_documents([docs["c"]], repo, settings(), show_progress=False)
    assert numbers(repo) == [2, 1]
    killed = subprocess.Popen([sys.executable, "-c", SLOW_GC, str(repo)], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not list(versions_dir(repo).glob(".collect-*")) and time.time() < deadline and killed.poll() is None:
        time.sleep(0.05)
    time.sleep(0.5)  # some of the version's files deleted, not all
    assert killed.poll() is None, killed.stderr.read()[-800:]
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    leftovers = list(versions_dir(repo).glob(".collect-*"))
    assert leftovers and any(leftovers[0].rglob("*"))  # killed mid-way through a version
    assert doc_ids(validate_repository(repo)) == {"a", "b", "c"} and reads_whole(Repository.open(repo))
    assert len(numbers(repo)) == 1  # the half-removed one is not taken for a version
    done = collect(repo, keep=1)  # no stale lock: the kernel dropped the killed gc's
    assert numbers(repo) == [] and not list(versions_dir(repo).iterdir()) and done.kept == [3]
    assert reads_whole(validate_repository(repo))


def test_bad_input_is_one_line_and_a_non_zero_exit(docs, tmp_path):
    from pagerag.build import build_repository

    repo = tmp_path / "lib.rag"
    build_repository([docs["a"]], repo, settings(), show_progress=False)
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    cases = {
        ("--repo", str(repo), "--keep", "0"): "--keep must be at least 1",
        ("--repo", str(repo), "--keep", "-2"): "--keep must be at least 1",
        ("--repo", str(tmp_path / "missing")): "no repository here",
        ("--repo", str(tmp_path / "empty")): "not a PAGE-RAG repository",
        ("--repo", str(tmp_path / "file.txt")): "is a file, not a repository directory",
    }
    for args, message in cases.items():
        done = subprocess.run([sys.executable, "-m", "pagerag.cli", "gc", *args], capture_output=True, text=True)
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    with WriterLock(repo):  # a writer at work: gc says so and leaves everything
        done = subprocess.run([sys.executable, "-m", "pagerag.cli", "gc", "--repo", str(repo)], capture_output=True, text=True)
    assert done.returncode != 0 and "another writer" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    shutil.copytree(repo, repo.parent / ".lib.rag.previous")  # where an earlier pagerag kept the version before
    assert numbers(repo) == [1]
    done = subprocess.run([sys.executable, "-m", "pagerag.cli", "gc", "--repo", str(repo), "--keep", "1", "--json"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout)["kept"] == [1] and json.loads(done.stdout)["removed"] == [1]
    assert not (repo.parent / ".lib.rag.previous").exists() and numbers(repo) == []
    listed = subprocess.run([sys.executable, "-m", "pagerag.cli", "docs", "--repo", str(repo), "--json"],
                            capture_output=True, text=True)
    assert json.loads(listed.stdout)["kept"] == {"versions": 1, "bytes": tree_bytes([repo])}
    shown = subprocess.run([sys.executable, "-m", "pagerag.cli", "inspect", "--repo", str(repo), "--json"],
                           capture_output=True, text=True)
    assert json.loads(shown.stdout)["versions_kept"] == 1


def test_the_query_cache_keeps_the_current_version_and_the_one_before(docs, tmp_path, monkeypatch):
    """Each published version writes its query snapshot (with its community vectors) to the cache; the
    older versions' files go, but those of the version just before (a pinned reader's): a library
    grown by 20 adds had left one ~100 MB snapshot per version."""
    from pagerag.api import PageRAG
    from pagerag.build import add_documents, build_repository
    from pagerag.retrieve.state import _path_key, forget_state

    monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "lib.rag"
    cache = tmp_path / "cache" / "retrieve"

    def versions() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for path in cache.glob(f"{_path_key(repo)}-*"):
            found.setdefault(path.name.split("-")[1], []).append(path.name)
        return found

    build_repository([docs["a"]], repo, settings(), show_progress=False)
    seen = [set(versions())]
    earlier = cache / f"{_path_key(repo)}-communities-governed-by-text.npz"  # what earlier code kept across versions
    earlier.write_bytes(b"")
    for name in "bcd":
        add_documents([docs[name]], repo, settings(), show_progress=False)
        seen.append(set(versions()))
    assert not earlier.exists()  # not read any more: removed, and not taken for a version
    assert [len(s) for s in seen] == [1, 2, 2, 2]
    assert seen[3] == {*(seen[3] - seen[2]), *(seen[2] - seen[1])}  # the newest and the one before
    assert all(any(n.endswith("-governed-snapshot.pkl") for n in files) for files in versions().values())
    forget_state(repo)
    before = sorted(p.name for p in cache.iterdir())
    evidence = PageRAG(repo, llm="extractive").retrieve("Who is Scrooge?").evidence
    assert evidence and sorted(p.name for p in cache.iterdir()) == before  # read from the kept snapshot


def test_an_add_stems_only_the_passages_it_added(docs, tmp_path, monkeypatch):
    """The stems' passage counts (IDF) of a version that kept every passage of the one before are
    that version's counts plus the new passages': equal to counting them all, for the added
    passages' work. A removal counts them all again."""
    from pagerag.build import add_documents, build_repository, remove_documents
    from pagerag.retrieve.state import forget_state, get_state
    from pagerag.text.words import document_frequencies

    monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "lib.rag"

    def counted() -> tuple[dict, int, int]:
        forget_state(repo)
        for snapshot in (tmp_path / "cache" / "retrieve").glob("*-snapshot.pkl"):
            snapshot.unlink()  # so opening the version counts its stems again (the earlier counts stay)
        state = get_state(repo)
        (df, n), stemmed = state.stem_frequencies(), state._memo.get("stems_counted")
        assert n == len(state.passages) and df == document_frequencies(p.text for p in state.passages)
        return df, n, stemmed

    build_repository([docs["a"]], repo, settings(), show_progress=False)
    _, n_a, stemmed = counted()
    assert stemmed == n_a  # the first version counts every passage
    add_documents([docs["b"]], repo, settings(), show_progress=False)
    _, n_ab, stemmed = counted()
    assert n_ab > n_a and stemmed == n_ab - n_a
    remove_documents(["a"], repo, settings(), show_progress=False)
    _, n_b, stemmed = counted()
    assert stemmed == n_b == n_ab - n_a
