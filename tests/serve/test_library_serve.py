"""`pagerag serve` with a library that grows: an add publishes a new version, the server swaps to
it (questions in flight keep the old one), and a question can be limited to one document."""
from __future__ import annotations

import pytest
from serving import next_version

pytestmark = pytest.mark.slow


def test_served_library_swaps_to_the_version_an_add_publishes(carol_parts, carol_a_repo, tmp_path):
    import shutil

    from pagerag.build import add_documents
    from pagerag.serve.config import ServeConfig
    from pagerag.serve.registry import Registry
    from pagerag.settings import load_settings

    settings = load_settings(environ={})
    repo = tmp_path / "lib.rag"
    shutil.copytree(carol_a_repo, repo)  # the session's build of a
    registry = Registry(ServeConfig(repos={"lib": repo}, llm="extractive", warm=False).check()).start()
    try:
        with registry.use("lib") as old:  # a question in flight across the add
            add_documents([carol_parts["b"]], repo, settings, show_progress=False)
            new = next_version(registry, "lib", old)
            rag_settings = registry.config.settings()
            before = old.rag(rag_settings).retrieve("Who is Marley?")  # the old version still reads, whole
            assert {e.doc_id for e in before.evidence} == {"a"}
            assert [d["doc_id"] for d in new.rag(rag_settings).documents()] == ["a", "b"]
            limited = new.rag(rag_settings).retrieve("Who is Marley?", docs=["b"])
            assert limited.evidence and {e.doc_id for e in limited.evidence} == {"b"}
        assert not old.path.exists()
    finally:
        registry.close()
