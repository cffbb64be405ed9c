"""Build a real repository and check what it promises: offsets, provenance, statistics,
governance, atomic publish and resume."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pagerag.errors import InputError, RepositoryError
from pagerag.repository import FORMAT_VERSION, Repository
from pagerag.validation import validate_repository
from pagerag.settings import load_settings

pytestmark = pytest.mark.slow


def test_every_passage_is_its_source_span(carol_repo: Path, carol_excerpt: Path):
    repo = Repository.open(carol_repo)
    # offsets point into the decoded text: a UTF-8 byte-order mark is not part of it
    source = carol_excerpt.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
    assert len(repo.passages) > 20
    for p in repo.passages:
        assert source[p.start : p.end] == p.text
        assert repo.source_text(p.doc_id)[p.start : p.end] == p.text


def test_passages_fit_the_embedder(carol_repo: Path):
    from pagerag.index.embedding_model import get_wordpiece_counter

    repo = Repository.open(carol_repo)
    counts = get_wordpiece_counter()([p.text for p in repo.passages])
    assert max(counts) <= 256


def test_vectors_and_bm25_match_passages(carol_repo: Path):
    import numpy as np

    repo = Repository.open(carol_repo)
    vectors = repo.passage_vectors
    assert vectors.shape == (len(repo.passages), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    hits, scores = repo.bm25.search("Marley dead door-nail", 3)
    assert any("door-nail" in repo.passages[i].text for i in hits)
    nearest = repo.store.search("passages", vectors[5], 1)
    assert nearest[0][0] == 5


def test_graph_is_governed_and_provenanced(carol_repo: Path):
    repo = Repository.open(carol_repo)
    stats = repo.stats()
    assert stats["entities"] < stats["entities_raw"]
    assert stats["isolated"] <= stats["isolated_raw"]
    assert stats["build_tokens"] == 0
    governed = repo.graph("governed")
    names = {e.name.lower() for e in governed.entities}
    assert any("scrooge" in n for n in names)
    scrooges = [e for e in governed.entities if "scrooge" in e.name.lower() and e.type == "PERSON"]
    assert len(scrooges) == 1, [e.name for e in scrooges]  # "Scrooge", "Mr. Scrooge", … are one node
    known = repo.passage_index
    for element in [*governed.entities, *governed.relations, *governed.communities]:
        assert element.passage_ids, element
        assert all(pid in known for pid in element.passage_ids)
    assert governed.communities


def test_validation_reads_a_stored_graphs_provenance_as_its_records_give_it(carol_repo: Path, tmp_path: Path):
    """Validation checks provenance from the stored columns, without making records: it must find
    what the records' check finds, on a sound graph (nothing) and on a damaged one."""
    from pagerag.graph.provenance import provenance_problems
    from pagerag.validation import stored_provenance_problems

    sound = Repository.open(carol_repo)
    assert stored_provenance_problems(sound, "governed", sound.passages) == []
    damaged = tmp_path / "damaged.rag"
    shutil.copytree(carol_repo, damaged)
    repo = Repository.open(damaged)
    rows = repo.store.read("relations_governed")
    with_evidence = [r for r in rows if r["evidence"]]
    pid, start, _ = with_evidence[0]["evidence"][0]
    with_evidence[0]["evidence"][0] = [pid, start, start]  # an empty span
    with_evidence[1]["passage_ids"] = [*with_evidence[1]["passage_ids"], "no-such-passage"]
    repo.store.write("relations_governed", rows)
    repo = Repository.open(damaged)
    stored = stored_provenance_problems(repo, "governed", repo.passages)
    assert sorted(stored) == sorted(provenance_problems(repo.graph("governed"), repo.passages))
    assert any("evidence span" in p and with_evidence[0]["relation_id"] in p for p in stored)
    assert any("unknown passage no-such-passage" in p for p in stored) and len(stored) == 2
    with pytest.raises(RepositoryError, match="governed graph provenance"):
        validate_repository(damaged)


def test_the_raw_graph_is_made_from_the_mention_parts(carol_repo: Path, tmp_path: Path):
    """A spaCy-extracted version stores no raw graph: its tables are empty, and the raw graph is
    made again from the documents' mention parts when read (the counts the manifest gives, sound
    provenance, a name vector per entity). Without a mention part the version does not validate."""
    from pagerag.graph.provenance import provenance_problems

    repo = Repository.open(carol_repo)
    assert repo.manifest["raw_graph"] == "mention parts" and repo.derived("raw") and not repo.derived("governed")
    assert all(repo.store.count(f"{table}_raw") == 0 for table in ("entities", "relations", "communities"))
    raw, stats = repo.graph("raw"), repo.manifest["stats"]
    assert (len(raw.entities), len(raw.relations)) == (stats["entities_raw"], stats["relations_raw"])
    assert len(raw.entities) > len(repo.graph("governed").entities) and not provenance_problems(raw, repo.passages)
    assert repo.entity_vectors("raw").shape == (len(raw.entities), repo.passage_vectors.shape[1])
    assert len(repo.relation_table("raw")) == len(raw.relations)
    validate_repository(carol_repo)  # the full check builds the raw graph and checks its provenance
    without = tmp_path / "without.rag"
    shutil.copytree(carol_repo, without)
    for part in (without / "extract").iterdir():
        part.unlink()
    with pytest.raises(RepositoryError, match="raw graph mention parts: no mention part for"):
        validate_repository(without, graphs_checked=True)
    with pytest.raises(RepositoryError, match="mention part of .* is unreadable"):
        Repository.open(without).graph("raw")


def test_a_writer_checks_its_graphs_records_and_then_the_stored_counts(carol_repo: Path, tmp_path: Path):
    """A build or add checks the graphs' provenance on its records before writing them
    (check_graph_records) and then only the stored graph tables' row counts (graphs_checked): a record
    with an unknown passage stops it, and so does a table with a row fewer than the manifest says."""
    from pagerag.validation import check_graph_records

    repo = Repository.open(carol_repo)
    graphs = {kind: repo.graph(kind) for kind in ("raw", "governed")}
    check_graph_records(carol_repo, graphs, repo.passages)  # sound: nothing raised
    entity = graphs["governed"].entities[0]
    entity.passage_ids = [*entity.passage_ids, "no-such-passage"]
    with pytest.raises(RepositoryError, match="governed graph provenance: .*unknown passage no-such-passage"):
        check_graph_records(carol_repo, graphs, repo.passages)
    validate_repository(carol_repo, graphs_checked=True)
    short = tmp_path / "short.rag"
    shutil.copytree(carol_repo, short)
    stored = Repository.open(short)
    rows = stored.store.read("communities_governed")
    stored.store.write("communities_governed", rows[:-1])
    with pytest.raises(RepositoryError, match=f"governed graph tables: {len(rows) - 1} communities stored, "
                                              f"manifest says {len(rows)}"):
        validate_repository(short, graphs_checked=True)


def test_manifest_records_the_build(carol_repo: Path, carol_excerpt: Path):
    import hashlib

    manifest = json.loads((carol_repo / "manifest.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["sources"][0]["sha256"] == hashlib.sha256(carol_excerpt.read_bytes()).hexdigest()
    for stage in ("load", "chunk", "embed", "index", "extract", "govern", "communities"):
        assert stage in manifest["stage_seconds"]
    assert manifest["versions"]["spacy"] != "not installed"
    assert manifest["settings"]["chunk"]["tokens"] == 200


def test_failed_build_leaves_previous_repository_intact(carol_repo: Path, tmp_path: Path):
    from pagerag.build import build_repository

    copy = tmp_path / "copy.rag"
    shutil.copytree(carol_repo, copy)
    before = (copy / "manifest.json").read_bytes()
    empty = tmp_path / "empty.txt"
    empty.write_text("   \n\n  ")
    with pytest.raises(InputError):
        build_repository([empty], copy, load_settings(environ={}), show_progress=False)
    assert (copy / "manifest.json").read_bytes() == before
    validate_repository(copy)
    assert not list(tmp_path.glob(".copy.rag.staging-*"))


def test_future_version_repository_is_refused(carol_repo: Path, tmp_path: Path):
    from pagerag.build import build_repository

    future = tmp_path / "future.rag"
    shutil.copytree(carol_repo, future)
    manifest = json.loads((future / "manifest.json").read_text())
    manifest["format_version"] = FORMAT_VERSION + 1
    (future / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RepositoryError, match="newer pagerag"):
        Repository.open(future)
    source = tmp_path / "tiny.txt"
    source.write_text("Scrooge sat in his counting-house. Marley was dead.\n")
    with pytest.raises(RepositoryError, match="newer pagerag"):
        build_repository([source], future, load_settings(environ={}), show_progress=False)
    assert json.loads((future / "manifest.json").read_text())["format_version"] == FORMAT_VERSION + 1


def test_rebuild_replaces_repository_atomically(carol_excerpt: Path, tmp_path: Path):
    from pagerag.build import build_repository

    repo = tmp_path / "r.rag"
    first = build_repository([carol_excerpt], repo, load_settings(environ={}), show_progress=False)
    second = build_repository([carol_excerpt], repo, load_settings(environ={}), show_progress=False)
    # the second build paid for no embedding or extraction: both came from the stage cache
    assert {"embed", "extract"} <= set(second.resumed_stages)
    assert first.manifest["stats"]["passages"] == second.manifest["stats"]["passages"]
    validate_repository(repo)
    assert sorted(p.name for p in tmp_path.iterdir() if "staging" in p.name) == []


def test_multi_document_repository(carol_excerpt: Path, tmp_path: Path):
    """Several paths (a .txt and a folder holding a .md) make one repository; every passage
    points into its own document."""
    from pagerag.build import build_repository

    text = carol_excerpt.read_text(encoding="utf-8-sig")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "stave-one.md").write_text("# Stave One\n\n" + text[:6000], encoding="utf-8")
    second = tmp_path / "later.txt"
    second.write_text(text[30000:36000], encoding="utf-8")
    repo = tmp_path / "multi.rag"
    build_repository([folder, second], repo, load_settings(environ={}), show_progress=False)
    opened = validate_repository(repo)
    docs = {p.doc_id for p in opened.passages}
    assert docs == {"stave-one", "later"}
    assert {s["doc_id"] for s in opened.manifest["sources"]} == docs
    for p in opened.passages:
        assert opened.source_text(p.doc_id)[p.start : p.end] == p.text
