"""`--repo s3://bucket/prefix` against a real S3-compatible server started on loopback (moto's
server mode): build, add, docs and retrieve work there; a reader never sees a half-written
version (a writer killed mid-upload leaves the previous version whole, and the next publishes);
of two writers the second fails with one line."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from pagerag.repository import Repository
from pagerag.validation import validate_repository
from pagerag.settings import load_settings

pytestmark = pytest.mark.slow

pytest.importorskip("boto3", reason='boto3 is not installed (pip install "pagerag[s3]")')
pytest.importorskip("moto.server", reason='moto\'s server is not installed (pip install "moto[server]")')

from helpers.s3 import BUCKET, s3_server  # noqa: E402,F401  (the fixture)


def test_a_library_on_s3(s3_server, carol_parts, carol_ab_repo, tmp_path):
    from pagerag.api import PageRAG
    from pagerag.build import add_documents, build_repository
    from pagerag.objectstore import ObjectRepository

    settings = load_settings(environ={})
    uri = f"s3://{BUCKET}/books/lib"
    build_repository([carol_parts["a"]], uri, settings, show_progress=False)
    add_documents([carol_parts["b"]], uri, settings, show_progress=False)
    remote = ObjectRepository(uri)
    assert remote.latest()[0] == 2
    # a fresh reader (another cache dir) downloads version 2 and reads it whole
    env = dict(os.environ, PAGERAG_CACHE_DIR=str(tmp_path / "reader-cache"))
    listed = subprocess.run([sys.executable, "-m", "pagerag.cli", "docs", "--repo", uri, "--json"],
                            capture_output=True, text=True, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [d["doc_id"] for d in json.loads(listed.stdout)["documents"]] == ["a", "b"]
    found = subprocess.run([sys.executable, "-m", "pagerag.cli", "retrieve", "Who is Marley?", "--repo", uri,
                            "--doc", "a", "--json"], capture_output=True, text=True, env=env)
    assert found.returncode == 0, found.stderr
    assert {e["passage_id"].split(":")[0] for e in json.loads(found.stdout)["evidence"]} == {"a"}
    # the same passages and graph as a local build of both (the session's)
    local, there = Repository.open(carol_ab_repo), validate_repository(remote.materialise())
    assert [asdict(p) for p in local.passages] == [asdict(p) for p in there.passages]
    assert [asdict(e) for e in local.graph("governed").entities] == [asdict(e) for e in there.graph("governed").entities]
    # the add uploaded only what it added or rewrote: every blob of version 1 still serves version 2
    one, two = remote.files(1), remote.files(2)
    shared = [p for p in one if p in two and one[p][0] == two[p][0]]
    assert any(p.startswith("sources/a") for p in shared) and any(p.startswith("tables/passages.lance/data/") for p in shared)
    assert PageRAG(uri, settings=settings).documents()[1]["doc_id"] == "b"


def test_a_reader_never_sees_a_half_written_version(s3_server, carol_parts, tmp_path):
    import boto3

    from pagerag.build import build_repository
    from pagerag.objectstore import ObjectRepository

    settings = load_settings(environ={})
    uri = f"s3://{BUCKET}/books/killed"
    build_repository([carol_parts["a"]], uri, settings, show_progress=False)
    client = boto3.client("s3")
    count = lambda: client.list_objects_v2(Bucket=BUCKET, Prefix="books/killed/blobs/").get("KeyCount", 0)
    before = count()
    # a writer killed while it uploads: a hook slows each upload so the kill lands mid-way
    writer = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, uri, str(carol_parts["b"])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 600
    readings = []
    while time.time() < deadline and writer.poll() is None and count() < before + 3:
        readings.append(_read_whole(uri, tmp_path / f"r{len(readings)}"))
        time.sleep(0.5)
    assert writer.poll() is None, f"the writer ended before it could be killed: {writer.stderr.read()[-500:]}"
    writer.kill()
    writer.wait()
    assert count() >= before + 3  # it did upload some of the new version
    readings.append(_read_whole(uri, tmp_path / "after-kill"))
    assert set(readings) == {("a",)}  # every reader saw version 1, whole
    assert ObjectRepository(uri).latest()[0] == 1
    # the next writer publishes version 2; a reader now sees it, whole
    from pagerag.build import add_documents

    add_documents([carol_parts["b"]], uri, settings, show_progress=False)
    assert _read_whole(uri, tmp_path / "after-add") == ("a", "b")


def test_the_second_of_two_writers_fails_with_one_line(s3_server, carol_parts, tmp_path):
    from pagerag.build import build_repository
    from pagerag.errors import RepositoryError
    from pagerag.objectstore import ObjectRepository

    settings = load_settings(environ={})
    uri = f"s3://{BUCKET}/books/race"
    build_repository([carol_parts["a"]], uri, settings, show_progress=False)
    first, second = ObjectRepository(uri), ObjectRepository(uri)
    work1, v1, etag1, files1 = first.work_copy()
    work1 = Path(shutil.copytree(work1, tmp_path / "first"))  # (one process: both work copies share a path)
    work2, v2, etag2, files2 = second.work_copy()
    (work2 / "sources" / "second.txt").write_text("only the second writer's\n", encoding="utf-8")
    first.publish(work1, v1, etag1, files1)
    with pytest.raises(RepositoryError, match="another writer published a version first"):
        second.publish(work2, v2, etag2, files2)
    assert first.latest()[0] == 2
    assert "sources/second.txt" not in first.files(2)  # version 2 is the first writer's, not overwritten by the second


def _read_whole(uri: str, cache: Path) -> tuple[str, ...]:
    """What a new reader (its own cache dir) sees: the documents of a version that validates."""
    env = dict(os.environ, PAGERAG_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", READER, uri], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-800:]
    return tuple(json.loads(done.stdout))


READER = r'''
import json, sys
from pagerag.objectstore import ObjectRepository
from pagerag.validation import validate_repository
repo = validate_repository(ObjectRepository(sys.argv[1]).materialise())
print(json.dumps(sorted({p.doc_id for p in repo.passages})))
'''

SLOW_WRITER = r'''
import sys, time
import boto3.s3.transfer
from pagerag.build import add_documents
from pagerag.settings import load_settings
import pagerag.objectstore as objectstore
slow = objectstore.ObjectRepository.client.fget
def client(self):
    c = slow(self)
    if not getattr(c, "_slowed", False):
        upload = c.upload_file
        def slowly(*a, **k):
            upload(*a, **k)
            time.sleep(1.0)
        c.upload_file = slowly
        c._slowed = True
    return c
objectstore.ObjectRepository.client = property(client)
add_documents([sys.argv[2]], sys.argv[1], load_settings(environ={}), show_progress=False)
'''
