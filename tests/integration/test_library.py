"""The repository as a library: add and remove make the versions a build of the same documents
makes; docs lists them; --doc limits a question; one writer at a time; a killed add leaves the
previous version; a repository built before libraries opens as one and grows."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from pagerag.errors import InputError, RepositoryError
from pagerag.repository import Repository
from pagerag.validation import validate_repository
from pagerag.settings import load_settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def parts(carol_parts) -> dict[str, Path]:
    return carol_parts


@pytest.fixture(scope="module")
def settings():
    return load_settings(environ={})


@pytest.fixture(scope="module")
def libraries(parts, settings, carol_ab_repo, carol_a_repo, tmp_path_factory) -> dict[str, Path]:
    """build(a+b) and build(a), the session's (read here, copied where a test changes them), and
    build(a) + add(b)."""
    from pagerag.build import add_documents

    root = tmp_path_factory.mktemp("libraries")
    shutil.copytree(carol_a_repo, root / "a_then_b.rag")
    add_documents([parts["b"]], root / "a_then_b.rag", settings, show_progress=False)
    return {"ab": carol_ab_repo, "a": carol_a_repo, "a_then_b": root / "a_then_b.rag"}


def passages_of(repo: Repository) -> dict[str, dict]:
    return {p.passage_id: asdict(p) for p in repo.passages}


def graph_of(repo: Repository, kind: str) -> tuple[list[dict], list[dict]]:
    g = repo.graph(kind)
    return [asdict(e) for e in g.entities], [asdict(r) for r in g.relations]


def community_ami(x: Repository, y: Repository) -> float:
    """Adjusted mutual information of the level-0 communities of the governed entities."""
    from sklearn.metrics import adjusted_mutual_info_score

    def labels(repo):
        return {m: c.community_id for c in repo.graph("governed").communities if c.level == 0 for m in c.entity_ids}

    lx, ly = labels(x), labels(y)
    common = sorted(set(lx) & set(ly))
    return float(adjusted_mutual_info_score([lx[e] for e in common], [ly[e] for e in common]))


def test_build_then_add_is_the_build_of_both(libraries):
    whole, grown = Repository.open(libraries["ab"]), Repository.open(libraries["a_then_b"])
    validate_repository(libraries["a_then_b"])
    assert passages_of(whole) == passages_of(grown)
    order = [grown.passage_index[p.passage_id] for p in whole.passages]
    assert np.allclose(whole.passage_vectors, grown.passage_vectors[order], atol=1e-6)
    for kind in ("governed", "raw"):
        assert graph_of(whole, kind) == graph_of(grown, kind), kind
        assert np.allclose(whole.entity_vectors(kind), grown.entity_vectors(kind), atol=1e-6), kind
    raw, stats = grown.graph("raw"), grown.manifest["stats"]  # an add lets the raw relations go once governed
    assert (stats["entities_raw"], stats["relations_raw"], stats["isolated_raw"]) == \
        (len(raw.entities), len(raw.relations), raw.stats()["isolated"])
    # the names table of the add: the base's rows, linked, and the names the add brought after them
    base_names, grown_names = Repository.open(libraries["a"]).name_vectors()[0], grown.name_vectors()[0]
    assert grown_names[:len(base_names)] == base_names and len(grown_names) > len(base_names)
    assert set(grown_names) == set(whole.name_vectors()[0])
    ami = community_ami(whole, grown)
    print(f"communities of build(A+B) vs build(A)+add(B): adjusted mutual information {ami:.3f}")
    assert ami > 0.5
    assert grown.manifest["library"]["version"] == 2
    assert [h["op"] for h in grown.manifest["library"]["history"]] == ["build", "add"]


def test_an_add_compares_only_its_new_names(libraries):
    """Governance's embedding merge in an add computes the cosines of the names it brought with
    every name of their type (new x all), never old x old again: those pairs come from the base's
    memo, and they are the pairs a build of both finds, with the same cosines."""
    from collections import Counter

    from pagerag.graph.name_pairs import NAME_MEMO, load_memo

    base, grown, whole = (load_memo(libraries[k] / NAME_MEMO) for k in ("a", "a_then_b", "ab"))
    stats = json.loads((libraries["a_then_b"] / "manifest.json").read_text())["governance"]["names_compared"]
    old = set(base.keys)
    new_by_type = Counter(t for t, n in grown.keys if (t, n) not in old)
    all_by_type = Counter(t for t, n in grown.keys)
    assert stats["names_new"] == sum(new_by_type.values()) < stats["names"] == len(grown.keys)
    assert stats["cosines_computed"] == sum(new_by_type[t] * all_by_type[t] for t in new_by_type)
    assert stats["cosines_computed"] < sum(n * n for n in all_by_type.values())  # what the build of both computed
    assert stats["pairs_reused"] > 0
    assert grown.keys == whole.keys
    named = lambda memo: {(memo.keys[i], memo.keys[j]): s for i, j, s in memo.pairs}  # noqa: E731
    assert named(grown).keys() == named(whole).keys()
    assert all(abs(named(grown)[k] - s) < 1e-6 for k, s in named(whole).items())


def test_remove_gives_the_build_without_it(libraries, settings, tmp_path):
    from pagerag.build import remove_documents

    repo = tmp_path / "ab.rag"
    shutil.copytree(libraries["ab"], repo)
    report = remove_documents(["b"], repo, settings, show_progress=False)
    assert report.removed == ["b"]
    shrunk, alone = validate_repository(repo), Repository.open(libraries["a"])
    assert passages_of(shrunk) == passages_of(alone)
    assert np.allclose(shrunk.passage_vectors, alone.passage_vectors, atol=1e-6)
    for kind in ("governed", "raw"):
        assert graph_of(shrunk, kind) == graph_of(alone, kind), kind
    assert not (repo / "sources" / "b.txt").exists() and not (repo / "windows" / "b.npz").exists()
    assert not any("b:" in pid for e in shrunk.graph("governed").entities for pid in e.passage_ids)
    # only names the removal changed (a cluster's best name can change with its mentions) are compared again
    compared = shrunk.manifest["governance"]["names_compared"]
    assert compared["names_new"] < compared["names"] and compared["pairs_reused"] > 0


def test_docs_noop_and_unknown_ids(libraries, parts, tmp_path):
    repo = tmp_path / "lib.rag"
    shutil.copytree(libraries["a_then_b"], repo)
    env = dict(os.environ)
    listed = subprocess.run([sys.executable, "-m", "pagerag.cli", "docs", "--repo", str(repo), "--json"],
                            capture_output=True, text=True, env=env)
    assert listed.returncode == 0, listed.stderr
    docs = json.loads(listed.stdout)
    assert docs["version"] == 2 and [d["doc_id"] for d in docs["documents"]] == ["a", "b"]
    first = docs["documents"][0]
    assert first["file"] == "a.txt" and first["words"] > 1000 and first["passages"] > 10 and len(first["sha256"]) == 64
    assert first["title"] == "A Christmas Carol" and first["added"]
    again = subprocess.run([sys.executable, "-m", "pagerag.cli", "add", str(parts["b"]), "--repo", str(repo), "-q"],
                           capture_output=True, text=True, env=env)
    assert again.returncode == 0 and "nothing to add" in again.stdout and "already in the library as b" in again.stderr
    assert json.loads((repo / "manifest.json").read_text())["library"]["version"] == 2
    unknown = subprocess.run([sys.executable, "-m", "pagerag.cli", "remove", "nope", "--repo", str(repo), "-q"],
                             capture_output=True, text=True, env=env)
    assert unknown.returncode != 0 and unknown.stderr.count("\n") == 1 and "no document 'nope'" in unknown.stderr


def test_doc_limits_a_question_to_its_documents(libraries, settings):
    from pagerag.api import PageRAG

    rag = PageRAG(libraries["a_then_b"], settings=settings)
    question = "What did Scrooge say to the gentlemen who asked for a donation?"
    everywhere = rag.retrieve(question)
    assert {e.doc_id for e in everywhere.evidence} <= {"a", "b"}
    for doc in ("a", "b"):
        limited = rag.retrieve(question, docs=[doc])
        assert limited.evidence and {e.doc_id for e in limited.evidence} == {doc}
        assert all(pid.startswith(f"{doc}:") for h in limited.hints for pid in h.passage_ids)
    with pytest.raises(InputError, match="no document 'zz'"):
        rag.retrieve(question, docs=["zz"])


def test_one_writer_at_a_time(libraries, parts, settings, tmp_path):
    from pagerag.build import add_documents
    from pagerag.repository import WriterLock

    repo = tmp_path / "lib.rag"
    shutil.copytree(libraries["a"], repo)
    with WriterLock(repo):
        with pytest.raises(RepositoryError, match=f"another writer \\(pid {os.getpid()}\\)"):
            add_documents([parts["b"]], repo, settings, show_progress=False)
        refused = subprocess.run([sys.executable, "-m", "pagerag.cli", "add", str(parts["b"]), "--repo", str(repo), "-q"],
                                 capture_output=True, text=True)
        assert refused.returncode != 0 and refused.stderr.count("\n") == 1 and "another writer" in refused.stderr
        results = {}

        def waiting_writer():
            results["report"] = add_documents([parts["b"]], repo, settings, show_progress=False, wait=True)

        writer = threading.Thread(target=waiting_writer)
        writer.start()
        time.sleep(1.0)
        assert writer.is_alive()  # it waits for the lock, released when this block ends
    writer.join(timeout=300)
    assert results["report"].added == ["b"]


def test_killed_add_leaves_the_previous_version(libraries, parts, tmp_path):
    repo = tmp_path / "lib.rag"
    shutil.copytree(libraries["a_then_b"], repo)
    before = (repo / "manifest.json").read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "pagerag.cli", "add", str(parts["c"]), "--repo", str(repo), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and not list(tmp_path.glob(".lib.rag.staging-*/tables")):
        time.sleep(0.05)
    assert proc.poll() is None, "the add finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert (repo / "manifest.json").read_bytes() == before
    opened = validate_repository(repo)
    assert {p.doc_id for p in opened.passages} == {"a", "b"}
    done = subprocess.run([sys.executable, "-m", "pagerag.cli", "add", str(parts["c"]), "--repo", str(repo), "-q"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert {p.doc_id for p in validate_repository(repo).passages} == {"a", "b", "c"}
    assert not list(tmp_path.glob(".lib.rag.staging-*"))


def test_a_repository_built_before_libraries_grows_like_one(libraries, parts, settings, tmp_path):
    """No mention parts, one windows.npz, sources without titles: it lists its documents, and an
    add reads its mentions again and gives the build of both."""
    from pagerag.build import add_documents
    from pagerag.retrieve.windows import WINDOWS_FILE, save_windows

    old = tmp_path / "old.rag"
    shutil.copytree(libraries["a"], old)
    shutil.rmtree(old / "extract")
    loaded = [np.load(f) for f in sorted((old / "windows").glob("*.npz"))]
    save_windows(old / WINDOWS_FILE, [int(c) for d in loaded for c in d["counts"]],
                 [tuple(s) for d in loaded for s in d["spans"].tolist()], np.concatenate([d["vectors"] for d in loaded]))
    shutil.rmtree(old / "windows")
    manifest = json.loads((old / "manifest.json").read_text())
    manifest.pop("library")
    manifest["windows"].pop("per_document")
    manifest["windows"].pop("vectors")  # its windows were embedded one by one, before pooling
    for source in manifest["sources"]:
        for key in ("title", "added", "passages"):
            source.pop(key)
    (old / "manifest.json").write_text(json.dumps(manifest))
    from pagerag.api import PageRAG

    assert [d["doc_id"] for d in PageRAG(old, settings=settings).documents()] == ["a"]
    add_documents([parts["b"]], old, settings, show_progress=False)
    grown, whole = validate_repository(old), Repository.open(libraries["ab"])
    assert passages_of(grown) == passages_of(whole)
    for kind in ("governed", "raw"):
        assert graph_of(grown, kind) == graph_of(whole, kind), kind
    assert (old / "windows" / "a.npz").is_file() and (old / "windows" / "b.npz").is_file()
    assert grown.manifest["windows"]["vectors"] == "mixed"  # a's as they were, b's pooled
    assert Repository.open(libraries["ab"]).manifest["windows"]["vectors"] == "pooled"


def test_past_ann_min_rows_dense_search_goes_through_an_ann_index(parts, tmp_path):
    from pagerag.api import PageRAG
    from pagerag.build import add_documents, build_repository
    from pagerag.retrieve.operators import use_lancedb

    settings = load_settings(environ={}, sets=["embed.ann_min_rows=20"])
    repo = tmp_path / "ann.rag"
    build_repository([parts["a"]], repo, settings, show_progress=False)
    assert json.loads((repo / "manifest.json").read_text())["ann"]["action"] == "created"
    add_documents([parts["b"]], repo, settings, show_progress=False)
    manifest = json.loads((repo / "manifest.json").read_text())
    assert manifest["ann"]["action"] == "updated" and manifest["ann"]["rows"] == manifest["stats"]["passages"]
    opened = Repository.open(repo)
    vectors = opened.passage_vectors
    for row in (0, len(vectors) // 2, len(vectors) - 1):  # the new rows are in the index too
        assert opened.store.search("passages", vectors[row], 1)[0][0] == row
    rag = PageRAG(repo, settings=settings)
    assert use_lancedb(rag.state, settings.retrieve.dense_search)
    assert rag.retrieve("Who is Marley?").evidence


def test_an_add_writes_its_version_without_the_encoder_held(parts, settings, carol_a_repo, tmp_path):
    """The compiled model is given back after the graph stages' last names: an add into a large
    library peaks while it writes the new version, and the model would sit under it."""
    from pagerag.build import add_documents
    from pagerag.index.encoder import get_encoder
    from pagerag.index.openvino_encoder import OpenVinoEncoder

    encoder = get_encoder(settings.embed)
    if not isinstance(encoder, OpenVinoEncoder):
        pytest.skip(f"the default encoder here is {type(encoder).__name__}: only OpenVINO's compiled model is dropped")
    loaded_at: dict[str, bool] = {}

    def watch(stage: str, completed: int, total) -> None:
        if completed == 0:
            loaded_at.setdefault(stage, encoder.model is not None)

    repo = tmp_path / "a.rag"
    shutil.copytree(carol_a_repo, repo)  # the session's build of a
    add_documents([parts["b"]], repo, settings, show_progress=False, on_progress=watch)
    assert loaded_at["communities"] is True  # compiled again for the new entity names
    assert loaded_at["publish"] is False


# --------------------------------------------------------------------------------------------
# The lexical index: appended by an add, not rebuilt; a full rebuild's results all the same

LEXICAL_QUESTIONS = ("Who is Marley?", "What did the ghost say about the chain?", "Scrooge counting-house clerk",
                     "Why was Scrooge afraid of the spirit?", "Christmas dinner goose pudding", "door-nail")


def lexical_hits(repo: Repository, k: int = 10) -> dict[str, list[tuple[str, float]]]:
    """Each question's BM25 top k as (passage id, score)."""
    out = {}
    for question in LEXICAL_QUESTIONS:
        rows, scores = repo.bm25.search(question, k)
        out[question] = [(repo.passages[int(r)].passage_id, float(s)) for r, s in zip(rows, scores)]
    return out


def assert_same_hits(x: dict, y: dict) -> None:
    assert x.keys() == y.keys()
    for question in x:
        assert [h[0] for h in x[question]] == [h[0] for h in y[question]], question
        assert np.allclose([h[1] for h in x[question]], [h[1] for h in y[question]], rtol=0, atol=1e-5), question


def test_an_add_appends_to_the_lexical_index(libraries):
    """build(A) + add(B): the add tokenized only B (A's shard is the build's file, linked), and
    every question's BM25 hits and scores are build(A+B)'s."""
    from pagerag.index.lexical import ShardedBM25

    whole, grown = Repository.open(libraries["ab"]), Repository.open(libraries["a_then_b"])
    assert isinstance(grown.bm25, ShardedBM25) and not (libraries["a_then_b"] / "bm25").exists()
    assert grown.manifest["lexical"]["tokenized"] == ["b"] and whole.manifest["lexical"]["tokenized"] == ["a", "b"]
    assert grown.bm25.n_docs == len(grown.passages)
    hits = lexical_hits(grown)
    assert any(hit[0].startswith("b:") for found in hits.values() for hit in found)  # B's passages are found
    assert_same_hits(hits, lexical_hits(whole))


def test_a_remove_drops_its_passages_from_the_lexical_index(libraries, settings, tmp_path):
    from pagerag.build import remove_documents

    repo = tmp_path / "ab.rag"
    shutil.copytree(libraries["ab"], repo)
    remove_documents(["b"], repo, settings, show_progress=False)
    shrunk = validate_repository(repo)
    assert not (repo / "lexical" / "b.npz").exists() and shrunk.manifest["lexical"]["tokenized"] == []
    assert_same_hits(lexical_hits(shrunk), lexical_hits(Repository.open(libraries["a"])))


def test_an_adds_validation_checks_the_new_documents_shards(libraries, tmp_path):
    """The writer's check of an add (validate_repository with its new documents) reads only their
    BM25 shards against their passages, and finds a shard file for every other document."""
    repo = tmp_path / "ab.rag"
    shutil.copytree(libraries["a_then_b"], repo)
    validate_repository(repo, docs={"b"}, graphs_checked=True)
    lexical = repo / "lexical"
    shutil.copy(lexical / "a.npz", lexical / "b.npz")  # another document's passages: another count
    with pytest.raises(RepositoryError, match=r"BM25 index does not match passages \(.*shard of b has"):
        validate_repository(repo, docs={"b"}, graphs_checked=True)
    shutil.copy(libraries["a_then_b"] / "lexical" / "b.npz", lexical / "b.npz")
    (lexical / "a.npz").unlink()
    with pytest.raises(RepositoryError, match=r"no shard for a"):
        validate_repository(repo, docs={"b"}, graphs_checked=True)
    with pytest.raises(RepositoryError, match="BM25"):  # and the full check, as before
        validate_repository(repo)


def make_format_2(repo: Path) -> None:
    """What a repository written before the names table looks like: each entity table with its
    names' vectors, the raw graph stored in its tables, format 2."""
    from dataclasses import asdict

    from pagerag.index.store import open_store

    opened = Repository.open(repo)
    graphs = {kind: opened.graph(kind) for kind in ("governed", "raw")}
    vectors = {kind: opened.entity_vectors(kind) for kind in graphs}
    store = open_store("lancedb", repo / "tables")
    for kind, graph in graphs.items():
        store.write(f"entities_{kind}", [asdict(e) for e in graph.entities], vectors[kind])
        store.write(f"relations_{kind}", [asdict(r) for r in graph.relations])
    shutil.rmtree(repo / "tables" / "names.lance")
    set_format(repo, 2, "raw_graph")


def make_format_1(repo: Path) -> None:
    """What a repository written before the BM25 shards looks like: one bm25s index over all
    passages in bm25/, no lexical/, format 1 (and format 2's graph tables)."""
    from pagerag.index.lexical import BM25Index

    make_format_2(repo)
    BM25Index.build([p.text for p in Repository.open(repo).passages]).save(repo / "bm25")
    shutil.rmtree(repo / "lexical")
    set_format(repo, 1, "lexical")


def set_format(repo: Path, version: int, dropped: str) -> None:
    """The manifest of an older format: its version, without the entry that format lacked."""
    manifest = json.loads((repo / "manifest.json").read_text())
    manifest["format_version"] = version
    manifest.pop(dropped)
    (repo / "manifest.json").write_text(json.dumps(manifest))


def test_an_old_format_repository_answers_and_grows(libraries, parts, settings, tmp_path):
    """A format-1 repository (bm25/) opens and answers with its bm25s index, the scores the
    shards give; an add makes every document's shard, and the build of both's lexical results."""
    from pagerag.api import PageRAG
    from pagerag.build import add_documents
    from pagerag.index.lexical import BM25Index, ShardedBM25

    old = tmp_path / "old.rag"
    shutil.copytree(libraries["a"], old)
    make_format_1(old)
    opened = validate_repository(old)
    assert isinstance(opened.bm25, BM25Index)
    assert_same_hits(lexical_hits(opened), lexical_hits(Repository.open(libraries["a"])))
    assert PageRAG(old, settings=settings).retrieve("Who is Marley?").evidence
    add_documents([parts["b"]], old, settings, show_progress=False)
    grown = validate_repository(old)
    assert isinstance(grown.bm25, ShardedBM25) and not (old / "bm25").exists()
    assert grown.manifest["format_version"] == 3 and grown.manifest["lexical"]["tokenized"] == ["a", "b"]
    assert_same_hits(lexical_hits(grown), lexical_hits(Repository.open(libraries["ab"])))
