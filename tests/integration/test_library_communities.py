"""Communities after an add (community.incremental, the default): an add re-clusters only the
governed graph's region it touched (the raw graph's communities are found afresh when a question
first reads them: they are not stored). Real build, add, Leiden and retrieval on carol_parts' a.txt, plus either a
document that shares no entity with it (a made-up voyage: every community is kept and global
questions read what they read) or the opening of another book (The Man Who Was Thursday: it shares
common nouns and, through governance's global counts, changes some of the Carol's own edges, so
only the communities it did not touch are kept)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pagerag.graph.communities import detect_communities, edge_weights, touched_region
from pagerag.library import previous_partition
from pagerag.repository import Repository
from pagerag.validation import validate_repository
from pagerag.settings import load_settings

pytestmark = pytest.mark.slow

OTHER_BOOK_CHARS = 20_000  # ~3.5k words: a document with no character of the Carol in it
GLOBAL = "What are the main themes of the story as a whole?"
OTHER_GLOBAL = ["How does the main character change from the beginning of the story to its end?", "What is the story about?"]
VOYAGE = """The Voyage of the Quillon

Captain Ysolde Varnakai commanded the airship Quillon above the salt flats of Tessivar. Her navigator, Orrin
Pellathane, read the astrolabe while the engineer Dovik Marrowend tuned the turbines.

At Tessivar the crew met the cartographer Liesl Quenhollow, who sold them charts of the Ashgrove volcanoes. Liesl
Quenhollow warned Ysolde Varnakai that the volcanoes of Ashgrove vented sulphur every equinox.

Orrin Pellathane plotted a course past the volcanoes toward the observatory of Kelmarsh Spire. Dovik Marrowend
repaired the turbines twice during the crossing, and the astrolabe cracked in the heat.

At Kelmarsh Spire the astronomer Baltasar Ozmundo measured the comet with his telescope. Baltasar Ozmundo told
Captain Ysolde Varnakai that the comet would return in seventy-six years.

The Quillon carried the telescope lenses back to Tessivar. Liesl Quenhollow drew a new chart of the comet's path,
and Orrin Pellathane signed it beside the astronomer's seal.

Dovik Marrowend kept the cracked astrolabe in the engine room of the Quillon. Years later Ysolde Varnakai gave the
airship to Orrin Pellathane, and the crew flew it once more over the salt flats of Tessivar and the volcanoes of
Ashgrove to Kelmarsh Spire.
"""
# Modularity of the incremental partition may fall short of a full recompute's by this much: the
# region cannot pull in entities of the communities it kept (measured here: governed 0.7213 vs
# 0.7212).
MODULARITY_TOLERANCE = 0.02


@pytest.fixture(scope="module")
def other_book(data_dir: Path, tmp_path_factory) -> Path:
    source = data_dir / "books" / "chesterton-thursday.txt"
    if not source.is_file():
        pytest.skip(f"{source} not found in PAGERAG_DATA_DIR")
    text = source.read_text(encoding="utf-8")
    cut = text.find("\n\n", OTHER_BOOK_CHARS)
    path = tmp_path_factory.mktemp("other") / "thursday.txt"
    path.write_text(text[:cut], encoding="utf-8")
    return path


def grow(base: Path, document: Path, name: str, tmp_path_factory) -> Path:
    """A copy of base with the document added, with the default settings (incremental communities)."""
    from pagerag.build import add_documents

    repo = tmp_path_factory.mktemp("grown") / name
    shutil.copytree(base, repo)
    add_documents([document], repo, load_settings(environ={}), show_progress=False)
    return repo


@pytest.fixture(scope="module")
def grown(carol_a_repo: Path, other_book: Path, tmp_path_factory) -> Path:
    return grow(carol_a_repo, other_book, "a_then_thursday.rag", tmp_path_factory)


@pytest.fixture(scope="module")
def voyaged(carol_a_repo: Path, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("voyage") / "voyage.txt"
    path.write_text(VOYAGE, encoding="utf-8")
    return grow(carol_a_repo, path, "a_then_voyage.rag", tmp_path_factory)


def untouched(base: Repository, grown: Repository, kind: str) -> set[str]:
    """The base's entities outside the region the add re-clustered (recomputed here from the two
    versions, as the add did)."""
    graph = grown.graph(kind)
    nodes = {e.entity_id for e in graph.entities}
    edges = edge_weights(((r.source, r.target, r.weight) for r in graph.relations), nodes)
    region = touched_region(nodes, edges, previous_partition(base, kind))
    return {e.entity_id for e in base.graph(kind).entities} & nodes - region


def level0(repo: Repository, kind: str) -> dict[str, str]:
    return {m: c.community_id for c in repo.graph(kind).communities if c.level == 0 for m in c.entity_ids}


def test_communities_the_add_did_not_touch_are_kept(carol_a_repo, grown, kind="governed"):
    from sklearn.metrics import adjusted_mutual_info_score

    validate_repository(grown)
    base, after = Repository.open(carol_a_repo), Repository.open(grown)
    kept = untouched(base, after, kind)
    region, total = after.manifest["governance"]["communities_reclustered"][kind]
    print(f"{kind}: {len(kept)} of the base's {len(base.graph(kind).entities)} entities untouched; "
          f"{region} of {total} entities re-clustered")
    assert kept and region < total  # measured: 22 of 53 governed entities untouched
    before_labels, after_labels = level0(base, kind), level0(after, kind)
    nodes = sorted(kept)
    assert adjusted_mutual_info_score([before_labels[n] for n in nodes], [after_labels[n] for n in nodes]) == 1.0
    # not only the same grouping: the same communities (ids, levels, parents, members) and summaries
    now = {c.community_id: c for c in after.graph(kind).communities}
    same = [c for c in base.graph(kind).communities if set(c.entity_ids) <= kept]
    assert same
    for c in same:
        d = now[c.community_id]
        assert (d.level, d.parent, d.entity_ids, d.title, d.summary) == (c.level, c.parent, c.entity_ids, c.title, c.summary)


def test_the_added_entities_are_in_communities(grown):
    after = Repository.open(grown)
    for kind in ("governed",):
        graph = after.graph(kind)
        labels = level0(after, kind)
        added = [e.entity_id for e in graph.entities if any(p.startswith("thursday:") for p in e.passage_ids)]
        assert added and all(n in labels for n in added)
        assert sorted(labels) == sorted(e.entity_id for e in graph.entities)  # level 0 covers every entity once
        ids = [c.community_id for c in graph.communities]
        assert len(ids) == len(set(ids))


def test_an_add_sharing_no_entity_keeps_every_community(carol_a_repo, voyaged):
    base, after = Repository.open(carol_a_repo), Repository.open(voyaged)
    for kind in ("governed",):
        region, total = after.manifest["governance"]["communities_reclustered"][kind]
        added = [e for e in after.graph(kind).entities if all(p.startswith("voyage:") for p in e.passage_ids)]
        assert region == len(added) == total - len(base.graph(kind).entities) > 0  # the voyage's entities alone
        now = {c.community_id: c for c in after.graph(kind).communities}
        assert all(now.get(c.community_id) == c for c in base.graph(kind).communities), kind


def test_a_global_question_about_the_old_document_reads_what_it_read(carol_a_repo, voyaged):
    """The same community hints for global questions about the Carol, and the same evidence: the
    whole pipeline's for GLOBAL, the community operator's alone for the others (the text operator
    may find the voyage's words for the others' common ones: not the communities' doing)."""
    from pagerag.api import PageRAG

    settings = load_settings(environ={})
    communities_only = settings.model_copy(deep=True)
    communities_only.retrieve.operators, communities_only.retrieve.floor = ["community"], False
    communities_only.retrieve.ranker = "operator"
    for question in [GLOBAL, *OTHER_GLOBAL]:
        for s in ([settings, communities_only] if question == GLOBAL else [communities_only]):
            before = PageRAG(carol_a_repo, settings=s).retrieve(question)
            after = PageRAG(voyaged, settings=s).retrieve(question)
            assert before.plan.need == "global" and "community" in before.plan.operators
            hints = [(h.text, h.passage_ids) for h in before.hints if h.kind == "community"]
            assert hints and [(h.text, h.passage_ids) for h in after.hints if h.kind == "community"] == hints
            assert [(e.passage_id, e.start, e.end) for e in after.evidence] == \
                   [(e.passage_id, e.start, e.end) for e in before.evidence], question


def test_modularity_is_close_to_a_full_recompute(grown):
    import networkx as nx

    after = Repository.open(grown)
    settings = load_settings(environ={}).community
    for kind in ("governed",):
        graph = after.graph(kind)
        g = nx.Graph()
        g.add_nodes_from(e.entity_id for e in graph.entities)
        nodes = set(g.nodes)
        g.add_weighted_edges_from((a, b, w) for (a, b), w in edge_weights(
            ((r.source, r.target, r.weight) for r in graph.relations), nodes).items())

        def modularity(communities):
            return nx.community.modularity(g, [set(c.entity_ids) for c in communities if c.level == 0])

        incremental, full = modularity(graph.communities), modularity(detect_communities(graph, settings))
        print(f"{kind}: modularity incremental {incremental:.4f}, full recompute {full:.4f}")
        assert incremental >= full - MODULARITY_TOLERANCE


def test_removing_the_document_again_gives_the_communities_before_it(carol_a_repo, voyaged, tmp_path):
    """A remove re-clusters the communities that lost members: here only the voyage's, which go."""
    from pagerag.build import remove_documents

    repo = tmp_path / "voyaged.rag"
    shutil.copytree(voyaged, repo)
    remove_documents(["voyage"], repo, load_settings(environ={}), show_progress=False)
    shrunk, alone = validate_repository(repo), Repository.open(carol_a_repo)
    assert shrunk.graph("governed").communities == alone.graph("governed").communities
    assert shrunk.manifest["governance"]["communities_reclustered"]["governed"][0] == 0


def test_the_raw_graphs_communities_are_found_when_first_read(grown, tmp_path, monkeypatch):
    """Not stored (an add does not keep them up to date); the raw graph's view finds them as a
    build would, with their summaries, over every raw entity, and its snapshot keeps them."""
    from pagerag.graph.summaries import summarised_communities
    from pagerag.retrieve.state import forget_state, get_state

    monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path))
    after = Repository.open(grown)
    stored = after.graph("raw")
    assert stored.relations and stored.communities == [] and after.stats()["communities_raw"] is None
    expected = summarised_communities(stored, after.passages, after.community_settings())
    view = get_state(grown).view("raw")
    assert view.graph.communities == expected
    assert sorted(m for c in expected if c.level == 0 for m in c.entity_ids) == sorted(e.entity_id for e in stored.entities)
    assert all(c.summary.startswith("Entities: ") and c.passage_ids for c in expected)
    forget_state(grown)
    assert get_state(grown).view("raw").graph.communities == expected  # from the snapshot
