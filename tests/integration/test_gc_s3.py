"""`pagerag gc` on S3 (moto's server on loopback): versions beyond the last N go with the blobs
only they named, unless a reader leases them; a reader downloading a version during gc gets it
whole; a writer publishing during gc never loses a blob (gc deletes none while a writer's lease
is fresh, and a writer waits while a gc's is); asks during adds and gcs never fail; a killed gc
leaves the latest version whole."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from helpers.library import small_documents
from helpers.processes import finish, watch
from pagerag.validation import validate_repository
from pagerag.settings import load_settings

pytestmark = pytest.mark.slow

pytest.importorskip("boto3", reason='boto3 is not installed (pip install "pagerag[s3]")')
pytest.importorskip("moto.server", reason='moto\'s server is not installed (pip install "moto[server]")')

from helpers.s3 import BUCKET, s3_server  # noqa: E402,F401  (the fixture)


@pytest.fixture(scope="module")
def docs(carol_excerpt, tmp_path_factory) -> dict[str, Path]:
    return small_documents(carol_excerpt, tmp_path_factory.mktemp("docs"))


@pytest.fixture(scope="module")
def settings():
    return load_settings(environ={})


def library(uri: str, docs, settings, names: str) -> None:
    """Version 1 of `names[0]`, then one add per further name."""
    from pagerag.build import add_documents, build_repository

    build_repository([docs[names[0]]], uri, settings, show_progress=False)
    for name in names[1:]:
        add_documents([docs[name]], uri, settings, show_progress=False)


def blob_names(uri: str) -> set[str]:
    from pagerag.objectstore import ObjectRepository

    listed, _now = ObjectRepository(uri)._list("blobs/")
    return {Path(name).name for name, _size, _m in listed}


def named_by(uri: str, version: int) -> dict[str, int]:
    from pagerag.objectstore import ObjectRepository

    return {sha: size for sha, size in ObjectRepository(uri).files(version).values()}


def read_fresh(uri: str, cache: Path) -> list[str]:
    """What a new reader (its own cache dir) sees: the documents of a version that validates."""
    env = dict(os.environ, PAGERAG_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", READER, uri], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-800:]
    return json.loads(done.stdout.strip().splitlines()[-1])


READER = r'''
import json, sys
from pagerag.objectstore import ObjectRepository
from pagerag.validation import validate_repository
repo = validate_repository(ObjectRepository(sys.argv[1]).materialise())
print(json.dumps(sorted({p.doc_id for p in repo.passages})))
'''

# A reader whose blob downloads wait for a go file: it holds its lease as long as the test wants
HELD_READER = r'''
import json, os, sys, time
from pathlib import Path
import pagerag.objectstore as objectstore
from pagerag.validation import validate_repository
get, go = objectstore.ObjectRepository._get, Path(sys.argv[2])
def waiting(self, name):
    while name.startswith("blobs/") and not go.exists():
        time.sleep(0.1)
    return get(self, name)
objectstore.ObjectRepository._get = waiting
remote = objectstore.ObjectRepository(sys.argv[1])
repo = validate_repository(remote.materialise())
print(json.dumps({"version": repo.manifest["library"]["version"], "docs": sorted({p.doc_id for p in repo.passages})}))
'''


def test_gc_on_s3_keeps_the_last_n_and_what_a_reader_leases(s3_server, docs, settings, tmp_path):
    from pagerag.build import add_documents
    from pagerag.objectstore import ObjectRepository
    from pagerag.versions import Kept, collect, kept

    uri = f"s3://{BUCKET}/gc/kept"
    library(uri, docs, settings, "abc")
    remote = ObjectRepository(uri)
    assert remote.version_numbers() == [1, 2, 3] and kept(uri).versions == 3
    go = tmp_path / "go"
    reader = subprocess.Popen([sys.executable, "-c", HELD_READER, uri, str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=dict(os.environ, PAGERAG_CACHE_DIR=str(tmp_path / "r")))
    try:
        deadline = time.time() + 120
        while not any(held.kind == "read" for held in remote.leases()) and time.time() < deadline:
            assert reader.poll() is None, reader.stderr.read()[-800:]
            time.sleep(0.2)
        add_documents([docs["d"]], uri, settings, show_progress=False)  # version 4; the reader is still on 3
        three = named_by(uri, 3)
        done = collect(uri, keep=1)
        assert (done.kept, done.held, done.removed) == ([4, 3], [3], [2, 1])
        assert remote.version_numbers() == [3, 4]
        assert blob_names(uri) == set(named_by(uri, 4)) | set(three)  # what 1 and 2 alone named is gone
        assert done.bytes_freed > 0 and kept(uri) == Kept(2, done.bytes_kept)
    finally:
        go.touch()
        out, err = reader.communicate(timeout=300)
    assert reader.returncode == 0, err[-800:]
    assert json.loads(out) == {"version": 3, "docs": ["a", "b", "c"]}  # whole, downloaded after the gc
    done = collect(uri, keep=1)  # its lease gone, 3 goes too
    assert done.removed == [3] and remote.version_numbers() == [4]
    four = named_by(uri, 4)
    assert blob_names(uri) == set(four) and kept(uri) == Kept(1, sum(four.values()))
    assert read_fresh(uri, tmp_path / "fresh") == ["a", "b", "c", "d"]
    assert remote.leases() == []  # every lease deleted by its holder


def test_a_writer_and_a_gc_at_the_same_time(s3_server, docs, settings, tmp_path):
    from pagerag.objectstore import Lease, ObjectRepository
    from pagerag.versions import collect

    uri = f"s3://{BUCKET}/gc/writer"
    library(uri, docs, settings, "ab")
    remote = ObjectRepository(uri)
    stray = "0" * 64  # a blob a writer has uploaded and no version names yet
    remote.client.put_object(Bucket=remote.bucket, Key=remote.key(f"blobs/{stray}"), Body=b"new")
    with Lease(remote, "write"):
        done = collect(uri, keep=1)
    assert done.writing and done.removed == [1] and stray in blob_names(uri)  # versions went, no blob
    done = collect(uri, keep=1)
    assert not done.writing and stray not in blob_names(uri) and blob_names(uri) == set(named_by(uri, 2))

    # a writer waits while a gc holds its lease, then publishes
    work, version, etag, files = remote.work_copy()
    (work / "sources" / "extra.txt").write_text("published after the gc\n", encoding="utf-8")
    published = []
    with Lease(remote, "gc"):
        writer = threading.Thread(target=lambda: published.append(remote.publish(work, version, etag, files)))
        writer.start()
        time.sleep(3.0)
        # nothing uploaded yet: the gc could not delete a blob the new version will name
        assert writer.is_alive() and remote.latest()[0] == 2 and blob_names(uri) == set(named_by(uri, 2))
    writer.join(timeout=120)
    assert published == [3] and "sources/extra.txt" in remote.files(3)
    assert set(named_by(uri, 3)) <= blob_names(uri)

    # a writer killed between its version file and LATEST: the next writer replaces that file
    orphan = {"version": 4, "created": "", "files": {"sources/lost.txt": ["1" * 64, 3]}}
    remote.client.put_object(Bucket=remote.bucket, Key=remote.key("versions/000004.json"), Body=json.dumps(orphan).encode())
    work, version, etag, files = remote.work_copy()
    assert remote.publish(work, version, etag, files) == 4 and "sources/lost.txt" not in remote.files(4)
    assert read_fresh(uri, tmp_path / "fresh") == ["a", "b"]


ASKER = r'''
import json, shutil, sys, time
from pathlib import Path
import pagerag.objectstore as objectstore
from pagerag.api import PageRAG
from pagerag.offline import cache_root
uri, stop = sys.argv[1], Path(sys.argv[2])
get = objectstore.ObjectRepository._get
def slower(self, name):  # a download of a few seconds: longer beside the adds and gcs
    time.sleep(0.05 if name.startswith("blobs/") else 0)
    return get(self, name)
objectstore.ObjectRepository._get = slower
done, errors, versions = 0, [], set()
print("ready", flush=True)
while not stop.exists():
    try:
        shutil.rmtree(cache_root() / "objectstore", ignore_errors=True)  # every ask downloads the latest version
        rag = PageRAG(uri, llm="extractive")
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


def test_asks_on_s3_during_adds_and_gcs_never_fail(s3_server, docs, settings, tmp_path):
    from pagerag.build import add_documents, remove_documents
    from pagerag.versions import collect

    uri = f"s3://{BUCKET}/gc/asks"
    library(uri, docs, settings, "ab")
    stop = tmp_path / "stop"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAGERAG_LLM__")}
    env["PAGERAG_CACHE_DIR"] = str(tmp_path / "asker")
    asker = subprocess.Popen([sys.executable, "-c", ASKER, uri, str(stop)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert asker.stdout.readline().strip() == "ready"
    lines = watch(asker)
    gcs, cycles, deadline = [], 0, time.time() + 900
    try:
        while (cycles < 2 or lines.count("asked") < 4) and time.time() < deadline:
            add_documents([docs["c"]], uri, settings, show_progress=False)
            gcs += [collect(uri, keep=1) for _ in range(3)]
            remove_documents(["c"], uri, settings, show_progress=False)
            gcs += [collect(uri, keep=1) for _ in range(3)]
            cycles += 1
    finally:
        stop.touch()
        finish(asker)
    report = json.loads(lines[-1])
    err = asker.stderr.read()
    print("asks:", report, "held:", [g.held for g in gcs])
    assert report["errors"] == [], err[-800:]
    assert report["asks"] >= 4 and len(report["versions"]) >= 2
    assert sum(len(g.removed) for g in gcs) >= 4  # the gcs did remove versions while the asks ran
    assert read_fresh(uri, tmp_path / "fresh") == ["a", "b"]



SLOW_GC = r'''
import sys, time
import pagerag.objectstore as objectstore
delete = objectstore.ObjectRepository._delete
def slowly(self, names):
    for name in names:
        time.sleep(0.3)
        delete(self, [name])
objectstore.ObjectRepository._delete = slowly
from pagerag.versions import collect
collect(sys.argv[1], keep=1)
'''


def test_a_killed_gc_on_s3_leaves_the_latest_version_whole(s3_server, docs, settings, tmp_path):
    from pagerag.objectstore import ObjectRepository
    from pagerag.versions import collect

    uri = f"s3://{BUCKET}/gc/killed"
    library(uri, docs, settings, "abc")
    remote = ObjectRepository(uri)
    blobs = len(blob_names(uri))
    killed = subprocess.Popen([sys.executable, "-c", SLOW_GC, uri], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while len(blob_names(uri)) == blobs and time.time() < deadline and killed.poll() is None:
        time.sleep(0.1)
    assert killed.poll() is None, killed.stderr.read()[-800:]
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert remote.version_numbers() == [3] and blob_names(uri) > set(named_by(uri, 3))  # killed mid-way
    assert read_fresh(uri, tmp_path / "after-kill") == ["a", "b", "c"]
    done = collect(uri, keep=1)  # the killed gc's lease is a dead process's on this host: no obstacle
    assert done.kept == [3] and blob_names(uri) == set(named_by(uri, 3))
    assert read_fresh(uri, tmp_path / "after-gc") == ["a", "b", "c"]


def test_bad_input_on_s3_is_one_line(s3_server, tmp_path):
    for args, message in {("--repo", f"s3://{BUCKET}/gc/nothing-here"): "no repository here",
                          ("--repo", f"s3://{BUCKET}/gc/nothing-here", "--keep", "0"): "--keep must be at least 1"}.items():
        done = subprocess.run([sys.executable, "-m", "pagerag.cli", "gc", *args], capture_output=True, text=True)
        assert done.returncode != 0 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
