"""The same question gets the same answer: retrieval and the decision are a function of
(repository, settings, question) alone, not of which questions were asked before or of what
the on-disk window cache holds. Asked on a cold cache in one order, then on a warm cache in the
reverse order, every answer, refusal and piece of evidence is the same. Real build, extractive."""
from __future__ import annotations

from pathlib import Path

import pytest

QUESTIONS = [
    "Who was Marley?",
    "What does Scrooge say about Christmas?",
    "Where does Scrooge keep his clerk?",
    "What did the first spirit look like?",
    "Why do the two gentlemen visit Scrooge?",
    "What was the name of Scrooge's dog?",
]


@pytest.fixture(scope="module")
def on_demand_repo(carol_excerpt: Path, tmp_path_factory) -> Path:
    """Windows not embedded by the build: every question fills the window cache as it goes,
    which is where an answer could come to depend on the questions before it."""
    from pagerag.build import build_repository
    from pagerag.settings import load_settings

    repo = tmp_path_factory.mktemp("repeat") / "carol.rag"
    build_repository([carol_excerpt], repo, load_settings(environ={}, overrides={"embed": {"windows": False}}),
                     show_progress=False)
    return repo


def _outcome(rag, question: str) -> tuple:
    answer = rag.ask(question)
    evidence = tuple((e.passage_id, e.start, e.end, tuple(e.operators)) for e in rag.retrieve(question).evidence)
    return (answer.decision, answer.reason, answer.answer, tuple(c.passage_id for c in answer.citations), evidence)


@pytest.mark.parametrize("repo_fixture", ["on_demand_repo", "carol_repo"])
def test_cold_then_warm_in_another_order_gives_the_same_answers(repo_fixture, request):
    from pagerag.api import PageRAG
    from pagerag.retrieve.state import forget_state

    repo = request.getfixturevalue(repo_fixture)
    forget_state(repo)
    cold = {q: _outcome(PageRAG(repo, llm="extractive"), q) for q in QUESTIONS}
    forget_state(repo)  # a new process: the window cache now comes from disk, warm
    rag = PageRAG(repo, llm="extractive")
    warm = {q: _outcome(rag, q) for q in reversed(QUESTIONS)}
    assert warm == cold
    assert any(outcome[0] == "answered" for outcome in cold.values())
