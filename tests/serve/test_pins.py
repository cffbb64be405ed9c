"""Pinned copies of repository versions (pagerag/serve/pins.py): hard links, one copy per
version, never a mix of two versions, deleted when no live process serves them."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from pagerag.repository import publish
from pagerag.serve import pins


def _repo(path, created: str):
    (path / "tables").mkdir(parents=True)
    (path / "sources").mkdir()
    (path / "tables" / "passages.lance").write_text(f"rows of {created}")
    (path / "sources" / "book.txt").write_text(f"text of {created}")
    (path / "manifest.json").write_text(json.dumps({"format_version": 1, "created": created}))
    return path


def _republish(repo, created: str) -> None:
    staging = repo.parent / f".{repo.name}.staging-test"
    shutil.rmtree(staging, ignore_errors=True)
    _repo(staging, created)
    publish(staging, repo)  # rename exchange, then the old directory is deleted


def test_pin_links_every_file_and_reuses_the_copy(tmp_path):
    repo = _repo(tmp_path / "book.rag", "v1")
    pinned, version = pins.pin(repo)
    assert pinned.parent == tmp_path / ".book.rag.serve" and pinned.name == version
    for name in ("manifest.json", "tables/passages.lance", "sources/book.txt"):
        assert os.stat(pinned / name).st_ino == os.stat(repo / name).st_ino  # a hard link, no data copied
    assert pins.pin(repo) == (pinned, version)
    pins.release(pinned)
    assert not pinned.exists()


def test_old_copy_outlives_the_publish_until_released(tmp_path):
    repo = _repo(tmp_path / "book.rag", "v1")
    old, v1 = pins.pin(repo)
    stamp = pins.fingerprint(repo)
    _republish(repo, "v2")
    assert pins.fingerprint(repo) != stamp
    new, v2 = pins.pin(repo)
    assert v2 != v1
    assert (old / "sources" / "book.txt").read_text() == "text of v1"  # the old files are still there
    assert (new / "sources" / "book.txt").read_text() == "text of v2"
    pins.release(old)
    assert not old.exists() and new.exists()
    pins.release(new)


def test_a_publish_during_the_copy_never_yields_a_mixed_copy(tmp_path, monkeypatch):
    repo = _repo(tmp_path / "book.rag", "v1")
    original = pins._link_tree
    calls = []

    def link_then_publish(fd, target):
        original(fd, target)
        if not calls:  # the first copy finishes just as a build swaps in v2
            _republish(repo, "v2")
        calls.append(target)

    monkeypatch.setattr(pins, "_link_tree", link_then_publish)
    pinned, version = pins.pin(repo)
    assert len(calls) == 2  # the first copy was thrown away, the second taken from v2
    assert json.loads((pinned / "manifest.json").read_text())["created"] == "v2"
    assert (pinned / "sources" / "book.txt").read_text() == "text of v2"
    assert [p.name for p in pinned.parent.iterdir() if ".tmp-" in p.name] == []
    pins.release(pinned)


def test_prune_removes_copies_no_live_process_serves(tmp_path):
    repo = _repo(tmp_path / "book.rag", "v1")
    root = pins.pins_root(repo)
    for name, pid in (("aaaaaaaaaaaa", 2**22 + 12345), ("bbbbbbbbbbbb", 1)):  # a dead pid; init (alive)
        (root / name).mkdir()
        (root / f"{name}.users").mkdir()
        (root / f"{name}.users" / str(pid)).touch()
    (root / f"cccccccccccc.tmp-{2**22 + 12345}").mkdir()  # a half-made copy of a dead process
    if not pins.pid_alive(1):
        pytest.skip("cannot see pid 1 here")
    pins.prune(repo, keep="zzzzzzzzzzzz")
    left = sorted(p.name for p in root.iterdir() if not p.name.startswith("."))
    assert left == ["bbbbbbbbbbbb", "bbbbbbbbbbbb.users"]
