"""The build embeds every passage's sentence windows into the repository (windows/<doc>.npz), so a
question embeds none of them, and it writes the query snapshot, so the first question after a
build loads as fast as the next. Real build, real encoder."""
from __future__ import annotations

import pickle
import time
from pathlib import Path

import numpy as np
import pytest

from pagerag.settings import load_settings

STORY = "\n\n".join(
    f"Chapter {n}. The keeper Tobias climbed the tower on the {n}th night of the storm and lit the lamps. "
    f"His daughter Morwenna rowed out with bread and salted fish, and she told him the news of the harbour. "
    f"The schooner Bright Hope had been seen off the point, and the fishermen said the wind would turn by morning."
    for n in range(1, 40)
)


def _refuse_to_encode(texts):
    raise AssertionError(f"a question embedded {len(texts)} window(s): the build should have")


@pytest.fixture(scope="module")
def settings():
    return load_settings(environ={})


@pytest.fixture(scope="module")
def story(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("story") / "gull_rock.txt"
    path.write_text(STORY + "\n", encoding="utf-8")
    return path


def test_the_build_stores_every_window_of_every_passage(carol_repo, settings):
    from pagerag.retrieve.api import get_encoder
    from pagerag.retrieve.state import get_state
    from pagerag.retrieve.windows import WINDOWS_DIR, WindowIndex, passage_windows

    state = get_state(carol_repo)
    made = state.manifest["windows"]
    assert made["per_document"] and made["model"] == settings.embed.model and made["vectors"] == "pooled"
    assert [f.name for f in (carol_repo / WINDOWS_DIR).iterdir()] == ["carol_excerpt.npz"]  # one file per document
    cut = [passage_windows(p, state.source_text(p.doc_id)) for p in state.passages]
    assert made["count"] == sum(len(ws) for ws in cut)
    index = WindowIndex(state, settings.embed.model)  # as a new process opens it
    assert sorted(index.vectors) == list(range(len(state.passages)))
    encode = get_encoder(settings)
    for row in (0, len(cut) // 2, len(cut) - 1):  # the stored vectors are pooled from their passage's pass
        p = state.passages[row]
        assert [(w.start, w.end) for w in index.windows_of(row)] == [(w.start, w.end) for w in cut[row]]
        _, pooled = encode.with_spans([p.text], [[(w.start - p.start, w.end - p.start) for w in cut[row]]])
        assert np.min(np.sum(pooled * index.vectors[row], axis=1)) > 0.9999


def test_a_question_embeds_no_window(carol_repo, settings):
    from pagerag.retrieve.rerank import score_windows
    from pagerag.retrieve.state import get_state

    state = get_state(carol_repo)
    qvec = np.zeros(state.vectors.shape[1], dtype=np.float32)
    qvec[0] = 1.0
    rows = list(range(len(state.passages)))
    scored = score_windows(state, rows, "Who is Marley?", qvec, _refuse_to_encode, settings.embed.model)
    assert sorted(scored) == rows


def test_windows_off_leaves_them_to_the_questions(story, tmp_path, settings):
    from pagerag.build import build_repository
    from pagerag.retrieve.api import get_encoder
    from pagerag.retrieve.state import get_state
    from pagerag.retrieve.windows import WINDOWS_DIR, window_index

    repo = tmp_path / "off.rag"
    build_repository([story], repo, load_settings(environ={}, overrides={"embed": {"windows": False}}), show_progress=False)
    assert not any((repo / WINDOWS_DIR).iterdir()) and "windows" not in get_state(repo).manifest
    index = window_index(get_state(repo), settings.embed.model)
    assert index.built_path() is None
    index.ensure([0, 5], get_encoder(settings))  # pooled on demand
    assert index.vectors[0].shape[0] == len(index.windows_of(0))
    on = tmp_path / "on.rag"
    build_repository([story], on, load_settings(environ={}), show_progress=False)
    built = window_index(get_state(on), settings.embed.model)
    for row in (0, 5):  # a question pools a passage's windows as the build does
        assert [(w.start, w.end) for w in built.windows_of(row)] == [(w.start, w.end) for w in index.windows_of(row)]
        assert np.min(np.sum(built.vectors[row] * index.vectors[row], axis=1)) > 0.9999


def test_the_build_writes_the_query_snapshot(story, tmp_path):
    from pagerag.build import build_repository
    from pagerag.retrieve.state import _snapshot_path, get_state

    repo = tmp_path / "snap.rag"
    build_repository([story], repo, load_settings(environ={}), show_progress=False)
    built = time.time()
    state = get_state(repo)
    snapshot = _snapshot_path(state.key)
    assert snapshot.is_file() and snapshot.stat().st_mtime <= built  # written by the build, not by this open
    df, n = state.stem_frequencies()  # IDF counts came with the snapshot
    assert n == len(state.passages) and df["keeper"] >= 1
    governed, raw = (_snapshot_path(f"{state.key}-{kind}") for kind in ("governed", "raw"))
    assert governed.is_file() and governed.stat().st_mtime <= built  # the graph questions read by default
    with governed.open("rb") as f:  # with the community operator's vectors, one per community
        vectors = pickle.load(f)._community_vectors
    assert vectors.shape == (len(state.view("governed").graph.communities), state.vectors.shape[1])
    assert not raw.is_file()  # the raw graph (an ablation's) is not held in memory by the build ...
    view = state.view("raw")
    assert raw.is_file() and view._ppr is not None  # ... but snapshotted by the first question reading it


def test_validating_a_repository_keeps_no_graph_in_memory(carol_repo):
    """An add validates the new version, then writes the query snapshot, which reads the governed
    graph again: validation must not keep both graphs cached beside it (the add's peak memory)."""
    from pagerag.validation import validate_repository

    repo = validate_repository(carol_repo)
    assert not repo._graphs and not repo._entity_vectors
    assert repo.graph("governed").entities  # still readable when asked again


def test_a_repository_let_go_is_freed_with_its_tables(carol_repo):
    """Nothing global keeps a Repository (and its passages, vectors, graphs) alive once its
    user lets go of it: an add opens several versions of a library in one process."""
    import gc
    import weakref

    from pagerag.repository import Repository

    repo = Repository.open(carol_repo)
    repo.graph("governed"), repo.entity_vectors("governed"), repo.passages
    repo.source_text(repo.passages[0].doc_id), repo.structure(repo.passages[0].doc_id)
    gone = weakref.ref(repo)
    del repo
    gc.collect()
    assert gone() is None
