"""`PageRAG(repo).ask(q)` offline (extractive backend, no-LLM judge) on a real repository built
from A Christmas Carol: answers quote the book exactly and cite it, refusals say why."""
from __future__ import annotations

import pytest
from ask_helpers import permissive_gate

from pagerag.api import PageRAG
from pagerag.errors import ConfigError, InputError
from pagerag.records import INSUFFICIENT


@pytest.fixture(scope="module")
def rag(carol_repo, tmp_path_factory) -> PageRAG:
    # The gate has its own tests (test_ask_policy.py); here it always passes, so these tests
    # check the judge and the answerer whatever RCS model is packaged.
    return PageRAG(carol_repo, llm="extractive", confidence=permissive_gate(tmp_path_factory.mktemp("rcs")))


def test_answer_quotes_and_cites_the_source_span(rag):
    answer = rag.ask("How much does Scrooge say his clerk earns per week?")
    assert answer.decision == "answered" and answer.reason is None
    assert "fifteen shillings" in answer.answer and "[1]" in answer.answer
    assert len(answer.citations) == 1
    c = answer.citations[0]
    source = _source_of(rag, c.passage_id)
    assert source[c.start:c.end] == c.quote  # the quote is the exact source span
    assert source.count("\n", 0, c.start) + 1 == c.line
    assert c.file.endswith("carol_excerpt.txt") and "fifteen shillings" in c.quote
    assert answer.verdict.method == "heuristic" and answer.verdict.sufficient
    assert answer.backend == "extractive" and answer.prompt_tokens == 0


def _source_of(rag: PageRAG, passage_id: str) -> str:
    row = rag.state.passage_index[passage_id]
    return rag.state.source_text(rag.state.passages[row].doc_id)


def test_question_the_book_never_answers_is_refused_with_what_is_missing(rag):
    answer = rag.ask("What is Fred's surname?")
    assert answer.decision == "refused" and answer.reason == INSUFFICIENT
    assert answer.citations == []
    assert "surname" in answer.answer and "Fred" in answer.answer
    assert answer.verdict.method == "heuristic" and not answer.verdict.sufficient


def test_outside_knowledge_questions_are_refused(rag):
    for question in ("In which London publishing house was A Christmas Carol first issued in 1843?",
                     "What was the name of Scrooge's father?"):
        answer = rag.ask(question)
        assert answer.decision == "refused", (question, answer.answer)
        assert answer.reason == INSUFFICIENT


def test_json_object_has_the_documented_keys_and_stage_timings(rag):
    data = rag.ask("How many years had Marley been dead?").to_dict()
    for key in ("decision", "answer", "reason", "citations", "rcs", "tau", "plan", "tokens", "latency_ms"):
        assert key in data
    assert data["decision"] in ("answered", "refused")
    assert {"retrieve", "evidence", "judge"} <= set(data["latency_ms"])
    assert data["latency_ms"]["retrieve"] > 0
    assert data["plan"]["budget_tokens"] == rag.settings.retrieve.budget_tokens
    for citation in data["citations"]:
        assert set(citation) >= {"n", "passage_id", "file", "start", "end", "quote"}


def test_answer_names_the_entities_and_route_behind_it(rag):
    data = rag.ask("How is Fred related to Scrooge?").to_dict()
    assert data["analysis"]["need"] == data["plan"]["need"]
    linked = {link["name"] for link in data["analysis"]["links"]}
    assert any("Scrooge" in name for name in linked) and any("Fred" in name for name in linked)
    assert all({"kind", "text", "passage_ids"} <= set(h) for h in data["hints"])


def test_bad_input_is_one_clear_error(rag):
    for bad in ("", "   ", None):
        with pytest.raises(InputError, match="empty|text"):
            rag.ask(bad)
    with pytest.raises(InputError, match="limit"):
        rag.ask("why " * 2000)
    with pytest.raises(ConfigError, match="unknown settings section"):
        PageRAG(rag.state.path, nonsense={"x": 1})
