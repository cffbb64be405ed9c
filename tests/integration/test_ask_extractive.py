"""`PageRAG(repo).ask(q)` offline (extractive backend, the fitted no-LLM sufficiency model and
the reader) on a real repository built from a training book's opening (printer_repo), asked
questions of that book's training set (helpers/questions.py): answers quote the book exactly and
cite it, refusals say why."""
from __future__ import annotations

import pytest
from ask_helpers import permissive_gate
from helpers.questions import ANSWER, ANSWERABLE, ARRIVAL, EXCERPT_FILE, METCALF, OUTSIDE_THE_EXCERPT

from pagerag.api import PageRAG
from pagerag.commands.ask import format_answer
from pagerag.errors import ConfigError, InputError
from pagerag.records import INSUFFICIENT


@pytest.fixture(scope="module")
def rag(printer_repo, tmp_path_factory) -> PageRAG:
    # The gate has its own tests (test_ask_policy.py); here it always passes, so these tests
    # check the sufficiency model and the answerer.
    return PageRAG(printer_repo, llm="extractive", confidence=permissive_gate(tmp_path_factory.mktemp("rcs")))


def test_answer_quotes_and_cites_the_source_span(rag):
    answer = rag.ask(ANSWERABLE)
    assert answer.decision == "answered" and answer.reason is None
    assert ANSWER in answer.answer and answer.answer.endswith(" [1]")
    assert len(answer.citations) == 1
    c = answer.citations[0]
    source = _source_of(rag, c.passage_id)
    assert source[c.start:c.end] == c.quote  # the quote is the exact source span
    assert source.count("\n", 0, c.start) + 1 == c.line
    assert c.file.endswith(EXCERPT_FILE) and ANSWER in c.quote
    # the answer is the reader's span or its sentence, in quotes: either way words of the quote
    body = answer.answer.removesuffix(" [1]").strip("\u201c\u201d")
    assert body and " ".join(body.split()) in " ".join(c.quote.split())
    assert answer.verdict.method == "model" and answer.verdict.sufficient
    assert answer.verdict.score >= float(answer.verdict.detail.split("tau ")[1].split(" ")[0])
    assert answer.backend == "extractive" and answer.prompt_tokens == 0


def _source_of(rag: PageRAG, passage_id: str) -> str:
    row = rag.state.passage_index[passage_id]
    return rag.state.source_text(rag.state.passages[row].doc_id)


def test_sufficiency_is_a_probability_against_a_threshold_from_the_target_cwar(printer_repo, rag, tmp_path):
    question = METCALF  # Novel-10146-a03
    answer = rag.ask(question)
    p = answer.verdict.score
    assert 0.0 < p < 1.0 and answer.verdict.method == "model"
    # the same question under a stricter and a laxer target CWAR: the threshold moves, P does not
    strict = PageRAG(printer_repo, llm="extractive", confidence=permissive_gate(tmp_path),
                     generate={"target_cwar": 0.01, "offline": "decide"}).ask(question)
    lax = PageRAG(printer_repo, llm="extractive", confidence=permissive_gate(tmp_path),
                  generate={"target_cwar": 0.99, "offline": "decide"}).ask(question)
    shown = PageRAG(printer_repo, llm="extractive", confidence=permissive_gate(tmp_path),
                    generate={"target_cwar": 0.01}).ask(question)  # the default offline: closest passage
    # (equal up to the encoder: the first question of a process is embedded by the numpy encoder)
    assert strict.verdict.score == pytest.approx(p, abs=0.01) and lax.verdict.score == pytest.approx(p, abs=0.01)
    assert strict.decision == "refused" and strict.reason == INSUFFICIENT and strict.citations == []
    assert "P(sufficient)" in strict.verdict.detail and strict.answer.startswith("The evidence is insufficient")
    assert lax.decision == "answered" and lax.label == "answer" and lax.caveat == ""
    # by default the same P below the same threshold refuses nothing: the passage is shown, labelled
    assert not shown.verdict.sufficient and shown.verdict.score == pytest.approx(p, abs=0.01)
    assert shown.decision == "answered" and shown.label == "closest_passage" and shown.citations
    assert shown.caveat.endswith(f"P(sufficient) {shown.verdict.score:.2f}")
    assert format_answer(shown).startswith("Closest passage (offline, the reader cannot check")


def test_questions_about_what_the_book_never_discusses_score_lower(rag):
    told = rag.ask(ANSWERABLE).verdict.score
    for question in OUTSIDE_THE_EXCERPT:  # their subjects come later in the book, not in the excerpt
        answer = rag.ask(question)
        assert answer.verdict.score < told, (question, answer.verdict)


def test_json_object_has_the_documented_keys_and_stage_timings(rag):
    data = rag.ask(ARRIVAL).to_dict()
    for key in ("decision", "answer", "reason", "citations", "rcs", "tau", "plan", "tokens", "latency_ms"):
        assert key in data
    assert data["decision"] in ("answered", "refused")
    assert {"retrieve", "evidence", "judge"} <= set(data["latency_ms"])
    assert data["latency_ms"]["retrieve"] > 0
    assert data["plan"]["budget_tokens"] == rag.settings.retrieve.budget_tokens
    for citation in data["citations"]:
        assert set(citation) >= {"n", "passage_id", "file", "start", "end", "quote"}


def test_answer_names_the_entities_and_route_behind_it(rag):
    data = rag.ask("How was Dr. Foster connected to Newson?").to_dict()
    assert data["analysis"]["need"] == data["plan"]["need"]
    linked = {link["name"] for link in data["analysis"]["links"]}
    assert any("Foster" in name for name in linked) and any("Newson" in name for name in linked)
    assert all({"kind", "text", "passage_ids"} <= set(h) for h in data["hints"])


def test_bad_input_is_one_clear_error(rag):
    for bad in ("", "   ", None):
        with pytest.raises(InputError, match="empty|text"):
            rag.ask(bad)
    with pytest.raises(InputError, match="limit"):
        rag.ask("why " * 2000)
    with pytest.raises(ConfigError, match="unknown settings section"):
        PageRAG(rag.state.path, nonsense={"x": 1})
