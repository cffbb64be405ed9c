"""The same question gets the same answer: retrieval and the decision are a function of
(repository, settings, question) alone, not of which questions were asked before or of what
the on-disk window cache holds. Asked on a cold cache in one order, then on a warm cache in the
reverse order, every answer, refusal and piece of evidence is the same. Real build, extractive."""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers.questions import ANSWERABLE, ARRIVAL, METCALF, NICKNAME, OUTSIDE_THE_EXCERPT, UNANSWERABLE

# questions of the training set of the book printer_repo is built from (helpers/questions.py:
# Novel-10146-a01, -a02, -a03, -a19, -u20, -u12), answerable and not
QUESTIONS = [ARRIVAL, ANSWERABLE, METCALF, NICKNAME, UNANSWERABLE, OUTSIDE_THE_EXCERPT[0]]


@pytest.fixture(scope="module")
def on_demand_repo(printer_excerpt: Path, tmp_path_factory) -> Path:
    """Windows not embedded by the build: every question fills the window cache as it goes,
    which is where an answer could come to depend on the questions before it."""
    from pagerag.build import build_repository
    from pagerag.settings import load_settings

    repo = tmp_path_factory.mktemp("repeat") / "printer.rag"
    build_repository([printer_excerpt], repo, load_settings(environ={}, overrides={"embed": {"windows": False}}),
                     show_progress=False)
    return repo


def _outcome(rag, question: str) -> tuple:
    answer = rag.ask(question)
    evidence = tuple((e.passage_id, e.start, e.end, tuple(e.operators)) for e in rag.retrieve(question).evidence)
    return (answer.decision, answer.reason, answer.label, answer.answer, tuple(c.passage_id for c in answer.citations), evidence)


@pytest.mark.parametrize("repo_fixture", ["on_demand_repo", "printer_repo"])
def test_cold_then_warm_in_another_order_gives_the_same_answers(repo_fixture, request):
    from pagerag.api import PageRAG
    from pagerag.retrieve.state import forget_state

    repo = request.getfixturevalue(repo_fixture)
    forget_state(repo)
    # reader-decides: the reader's model may refuse, so answers and refusals are both compared
    cold = {q: _outcome(PageRAG(repo, pipeline="reader-decides", llm="extractive"), q) for q in QUESTIONS}
    forget_state(repo)  # a new process: the window cache now comes from disk, warm
    rag = PageRAG(repo, pipeline="reader-decides", llm="extractive")
    warm = {q: _outcome(rag, q) for q in reversed(QUESTIONS)}
    assert warm == cold
    assert {outcome[0] for outcome in cold.values()} == {"answered", "refused"}  # both kinds compared
