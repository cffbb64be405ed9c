"""`--executor ray` against a real Ray cluster on this machine (ray.init(num_cpus=2)): the same
passages, vectors, windows and governed graph as the local executor."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from pagerag.repository import Repository
from pagerag.validation import validate_repository
from pagerag.settings import load_settings

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray", reason='Ray is not installed (pip install "pagerag[ray]")')
pytest.importorskip("ray.data", reason='Ray Data is not installed (pip install "pagerag[ray]")')


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield
    ray.shutdown()


def test_ray_builds_what_the_local_executor_builds(cluster, carol_parts, carol_ab_repo, tmp_path: Path):
    import shutil

    from pagerag.build import add_documents, build_repository

    settings = load_settings(environ={})
    docs = [carol_parts["a"], carol_parts["b"]]
    shutil.copytree(carol_ab_repo, tmp_path / "local.rag")  # the session's local build of a + b
    report = build_repository(docs, tmp_path / "ray.rag", settings, show_progress=False, executor="ray")
    assert report.manifest["stage_seconds"]["ray_cpus"] == 2  # the cluster the fixture started
    local, distributed = Repository.open(tmp_path / "local.rag"), validate_repository(tmp_path / "ray.rag")
    assert [asdict(p) for p in local.passages] == [asdict(p) for p in distributed.passages]
    assert np.array_equal(local.passage_vectors, distributed.passage_vectors)
    for kind in ("governed", "raw"):
        g, h = local.graph(kind), distributed.graph(kind)
        assert [asdict(e) for e in g.entities] == [asdict(e) for e in h.entities]
        assert [asdict(r) for r in g.relations] == [asdict(r) for r in h.relations]
        assert [asdict(c) for c in g.communities] == [asdict(c) for c in h.communities]
    for name in ("a.npz", "b.npz"):
        with np.load(tmp_path / "local.rag" / "windows" / name) as x, np.load(tmp_path / "ray.rag" / "windows" / name) as y:
            assert np.array_equal(x["spans"], y["spans"]) and np.array_equal(x["vectors"], y["vectors"])
    # an add on the cluster grows the library as a local add does
    add_documents([carol_parts["c"]], tmp_path / "ray.rag", settings, show_progress=False, executor="ray")
    add_documents([carol_parts["c"]], tmp_path / "local.rag", settings, show_progress=False)
    local, distributed = Repository.open(tmp_path / "local.rag"), validate_repository(tmp_path / "ray.rag")
    assert [asdict(p) for p in local.passages] == [asdict(p) for p in distributed.passages]
    assert [asdict(e) for e in local.graph("governed").entities] == [asdict(e) for e in distributed.graph("governed").entities]


def test_an_unreachable_cluster_is_one_line(carol_parts, tmp_path: Path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "pagerag.cli", "build", str(carol_parts["a"]), "--repo",
                           str(tmp_path / "x.rag"), "-q", "--executor", "ray", "--ray-address", "127.0.0.1:1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and done.stderr.count("\n") == 1 and "cannot join the Ray cluster" in done.stderr
    assert not (tmp_path / "x.rag").exists()
