"""`generate.judge = pick` (the default) with the `openai` backend against a real loopback HTTP server.

Each of the first evidence passages is shown alone with its sentences numbered; the model replies
with the number of the sentence that states the answer, or 0. P(some sentence) comes from the
first reply token's log-probabilities over the numbers (the written number when the server gives
none); the best excerpt's score, relative to the same question asked of a text that answers
nothing, against the threshold `pagerag calibrate --llm` fitted for the backend and model (else
the packaged one, fitted for the local 1.5B) decides; the answer is the named
sentence, quoted from the book and cited. The loopback model reads the numbered sentences it is
shown, as a model would: it names the one that states the sum, if any."""
from __future__ import annotations

import re

import pytest
from ask_helpers import loopback_llm, permissive_gate
from helpers.openai_server import LoopbackOpenAIServer
from helpers.questions import ANSWER, ANSWERABLE, UNANSWERABLE

from pagerag.api import PageRAG
from pagerag.generate.context import fold_space
from pagerag.generate.models import pick_decision
from pagerag.generate.window_judge import NULL_EXCERPT
from pagerag.records import INSUFFICIENT, UNSUPPORTED
from pagerag.resources import load_prompt

# The training book's sentence that states the sum (whitespace folded)
BOOK_SENTENCE = ("The district court, subsequently confirmed by the supreme court, decided in favor of the "
                 "Minnesotian, and the day following the decision Mr. Moore, of the Minnesotian, brought down a bag "
                 "of gold from the capitol containing $4,000, and divided it up among his employes.")
NUMBERED = re.compile(r"^\[(\d)\] (.*)$", re.M)


def numbered(body: dict) -> dict[str, str]:
    """The sentences a pick request shows, by number."""
    user = body["messages"][-1]["content"]
    assert "sentence by sentence" in user, user
    return dict(NUMBERED.findall(user))


PROPOSED = re.compile(r"^Proposed answer: (.*)$", re.M)


def confirms_the_sum(body: dict) -> dict[str, float] | None:
    """Asked to confirm a short answer (prompts/confirm_answer): yes to the sum, no to anything
    else; None for any other request."""
    proposed = PROPOSED.search(body["messages"][-1]["content"])
    if proposed is None:
        return None
    return {"Yes": -0.05, "No": -3.0} if ANSWER in proposed.group(1) else {"Yes": -3.0, "No": -0.05}


def names_the_sum(body: dict) -> dict[str, float]:
    """Nearly sure of the sentence that states the sum; nearly sure of 0 where none does."""
    if (confirming := confirms_the_sum(body)) is not None:
        return confirming
    stating = [n for n, sentence in numbered(body).items() if ANSWER in sentence]
    return {stating[0]: -0.05, "0": -3.5} if stating else {"0": -0.05, "1": -3.5}


PICK_ANSWER = load_prompt("pick_answer").strip()
ANEW = "Copy the few words of the excerpt that answer the question"  # prompts/answer_excerpt


def is_anew(body: dict) -> bool:
    """The best excerpt asked for the answer in a new conversation (generate.answer_anew)."""
    return ANEW in body["messages"][-1]["content"]


def is_follow_up(body: dict) -> bool:
    """The request for the answer in a few words, after the pick's number."""
    return body["messages"][-1]["content"] == PICK_ANSWER and body["messages"][-2]["role"] == "assistant"


def says_the_number(body: dict, short: str = ANSWER) -> str:
    """The number of the sentence that states the sum; asked then for the answer, `short` (and
    `short` again when asked anew)."""
    if is_follow_up(body) or is_anew(body):
        return short
    table = names_the_sum(body)
    return max(table, key=table.get)


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    return permissive_gate(tmp_path_factory.mktemp("rcs"))


def ask(printer_repo, gate, server, question=ANSWERABLE):
    return PageRAG(printer_repo, llm=loopback_llm(server), confidence=gate).ask(question)  # the default judge


def test_the_short_answer_is_given_with_the_sentence_that_states_it(printer_repo, gate):
    with LoopbackOpenAIServer(reply=says_the_number, top_logprobs=names_the_sum) as server:
        answer = ask(printer_repo, gate, server)
        bodies = list(server.bodies)
    picks, follow_ups, confirms = bodies[:-2], bodies[-2:-1], bodies[-1:]
    # one call an excerpt, and one on the control text that answers nothing (the score is relative to it)
    assert len(picks) == 5 and all(b.get("logprobs") and b["max_tokens"] == 1 for b in picks)
    assert sum(NULL_EXCERPT.split(".")[0] in b["messages"][-1]["content"] for b in picks) == 1
    for body in picks:  # at most 9 numbered sentences, so a number is one token
        assert 1 <= len(numbered(body)) <= 9
    # then the answer in a few words, in the conversation of the excerpt that named the sentence
    assert is_follow_up(follow_ups[0]) and ANSWER in follow_ups[0]["messages"][1]["content"]
    assert follow_ups[0]["messages"][-2]["content"] == says_the_number({"messages": follow_ups[0]["messages"][:2]})
    # then that answer read again with the sentence that states it (yes/no, log-probabilities)
    assert confirms_the_sum(confirms[0]) is not None and confirms[0].get("logprobs") and confirms[0]["max_tokens"] == 1
    assert BOOK_SENTENCE in fold_space(confirms[0]["messages"][-1]["content"])
    assert [j["confirmed"] for j in answer.judged if "confirmed" in j] == [pytest.approx(0.95, abs=0.01)]
    assert answer.decision == "answered" and answer.verdict.method == "llm-pick (packaged threshold)"
    assert fold_space(answer.citations[0].quote) == BOOK_SENTENCE
    assert answer.answer == f"{ANSWER} [1]"
    assert sorted(j["p_some"] > 0.9 for j in answer.judged) == [False, False, False, True]
    assert answer.verdict.score >= pick_decision()["tau"]
    assert answer.tokens["judge"]["prompt"] > 0


def test_where_no_sentence_is_named_the_evidence_is_insufficient(printer_repo, gate):
    with LoopbackOpenAIServer(reply=says_the_number, top_logprobs=names_the_sum) as server:
        answer = ask(printer_repo, gate, server, question=UNANSWERABLE)
    assert answer.decision == "refused" and answer.reason == INSUFFICIENT and answer.citations == []
    assert all(j["p_some"] < 0.1 for j in answer.judged) and "no sentence about" in answer.answer


def test_a_named_sentence_that_is_not_about_the_question_is_refused(printer_repo, gate):
    """In the excerpt that states the sum the model is sure of another sentence, one that shares no
    word with the question (elsewhere it names none): a sentence of the book, but not an answer to
    this question."""
    from pagerag.generate.answer import content_stems

    asked = content_stems(ANSWERABLE)

    def names_an_unrelated_sentence(body: dict) -> dict[str, float]:
        sentences = numbered(body)
        unrelated = [n for n, sentence in sentences.items() if not content_stems(sentence) & asked]
        states = any(ANSWER in sentence for sentence in sentences.values())
        return {unrelated[0]: -0.05, "0": -3.5} if states and unrelated else {"0": -0.05, "1": -3.5}

    with LoopbackOpenAIServer(reply=lambda body: "0", top_logprobs=names_an_unrelated_sentence) as server:
        answer = ask(printer_repo, gate, server)
    assert any(j["p_some"] > 0.9 for j in answer.judged), answer.judged  # some excerpt had such a sentence
    assert answer.decision == "refused" and answer.reason == UNSUPPORTED and answer.citations == []


@pytest.mark.parametrize("mode", ["reject_logprobs", "ignore_logprobs"])
def test_without_log_probabilities_the_written_number_decides(printer_repo, gate, mode):
    with LoopbackOpenAIServer(reply=says_the_number, top_logprobs=names_the_sum, mode=mode) as server:
        answer = ask(printer_repo, gate, server)
    assert answer.decision == "answered" and fold_space(answer.citations[0].quote) == BOOK_SENTENCE
    assert sorted(j["p_some"] for j in answer.judged) == [0.0, 0.0, 0.0, 1.0]


def test_a_threshold_calibrated_for_the_backend_and_model_replaces_the_packaged_one(printer_repo, gate, tmp_path,
                                                                                    monkeypatch):
    import json

    from pagerag.generate.models import llm_decision_path
    from pagerag.llm import get_llm
    from pagerag.settings import load_settings

    monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path))
    with LoopbackOpenAIServer(reply=says_the_number, top_logprobs=names_the_sum) as server:
        path = llm_decision_path(get_llm(load_settings(environ={}, llm=loopback_llm(server)).llm), "pick")
        assert path == tmp_path / "calibration" / "openai-loopback-model.pick.json"
        before = ask(printer_repo, gate, server)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"feature": "null", "tau": before.verdict.score + 0.5}), encoding="utf-8")
        after = ask(printer_repo, gate, server)
    assert before.decision == "answered"
    assert after.decision == "refused" and after.reason == INSUFFICIENT and after.verdict.method == "llm-pick"
    assert after.verdict.score == before.verdict.score and f"tau {before.verdict.score + 0.5:.2f}" in after.verdict.detail


@pytest.mark.parametrize("short", ["NONE", "$9,000", "the printers"])
def test_with_pick_answer_prefer_a_short_answer_that_does_not_check_out_leaves_the_named_sentence(
        printer_repo, gate, short, monkeypatch):
    """NONE, a sum the book does not state, words of no sentence that states it: the answer is the
    sentence the model named, quoted, as without the follow-up (asked of each of the best
    `generate.answer_excerpts` excerpts first)."""
    from pagerag.settings import load_settings

    tries = load_settings(environ={}).generate.answer_excerpts
    monkeypatch.setenv("PAGERAG_GENERATE__PICK_ANSWER", "prefer")
    with LoopbackOpenAIServer(reply=lambda body: says_the_number(body, short), top_logprobs=names_the_sum) as server:
        answer = ask(printer_repo, gate, server)
        asked = [b for b in server.bodies if is_follow_up(b)]
    assert len(asked) == tries and answer.decision == "answered"
    assert fold_space(answer.citations[0].quote) == BOOK_SENTENCE
    assert answer.answer == f"\u201c{fold_space(answer.citations[0].quote)}\u201d [1]"


@pytest.mark.parametrize("short", ["NONE", "$9,000"])
def test_by_default_an_answer_that_does_not_check_out_is_refused(printer_repo, gate, short):
    """pick_answer = require (the default): NONE or a sum the book does not state is refused as
    unsupported, though the named sentence states the sum; the checked answer is given."""
    with LoopbackOpenAIServer(reply=lambda body: says_the_number(body, short), top_logprobs=names_the_sum) as server:
        refused = ask(printer_repo, gate, server)
    with LoopbackOpenAIServer(reply=says_the_number, top_logprobs=names_the_sum) as server:
        answered = ask(printer_repo, gate, server)
    assert refused.decision == "refused" and refused.reason == UNSUPPORTED and refused.citations == []
    assert answered.decision == "answered" and answered.answer == f"{ANSWER} [1]"


def test_without_pick_answer_the_named_sentence_is_the_answer(printer_repo, gate, monkeypatch):
    monkeypatch.setenv("PAGERAG_GENERATE__PICK_ANSWER", "off")
    with LoopbackOpenAIServer(reply=says_the_number, top_logprobs=names_the_sum) as server:
        answer = ask(printer_repo, gate, server)
        assert not any(is_follow_up(b) for b in server.bodies)
    assert answer.answer == f"\u201c{fold_space(answer.citations[0].quote)}\u201d [1]"


def test_the_next_best_excerpt_answers_when_the_best_ones_answer_does_not_check_out(printer_repo, gate, monkeypatch):
    """The model is surest of a sentence in an excerpt that does not state the sum (and answers
    NONE there), then of the one that does: with `generate.answer_excerpts = 2` the second
    excerpt's checked answer is given, cited with its sentence; with 1 it is refused."""
    decoy: list[str] = []

    def surest_of_a_decoy(body: dict) -> dict[str, float]:
        if (confirming := confirms_the_sum(body)) is not None:
            return confirming
        sentences = numbered(body)
        if any(ANSWER in s for s in sentences.values()):
            return names_the_sum(body)
        if NULL_EXCERPT.split(".")[0] not in body["messages"][-1]["content"] and (not decoy or decoy[0] == fold_space(
                " ".join(sentences.values()))):
            decoy[:] = [fold_space(" ".join(sentences.values()))]
            return {"1": -0.01, "0": -4.5}
        return {"0": -0.05, "1": -3.5}

    def answers_where_it_is(body: dict) -> str:
        if is_follow_up(body) or is_anew(body):
            return ANSWER if ANSWER in body["messages"][1]["content"] else "NONE"
        table = surest_of_a_decoy(body)
        return max(table, key=table.get)

    answers = {}
    for tries in (1, 2):
        monkeypatch.setenv("PAGERAG_GENERATE__ANSWER_EXCERPTS", str(tries))
        with LoopbackOpenAIServer(reply=answers_where_it_is, top_logprobs=surest_of_a_decoy) as server:
            answers[tries] = ask(printer_repo, gate, server)
            follow_ups = [b for b in server.bodies if is_follow_up(b)]
        assert len(follow_ups) == tries and ANSWER not in follow_ups[0]["messages"][1]["content"]
    assert max(j["p_some"] for j in answers[2].judged) > 0.98  # the decoy scored highest
    assert answers[1].decision == "refused" and answers[1].reason == UNSUPPORTED
    assert answers[2].decision == "answered" and answers[2].answer == f"{ANSWER} [1]"
    assert fold_space(answers[2].citations[0].quote) == BOOK_SENTENCE


def test_an_answer_its_second_reading_does_not_confirm_is_refused(printer_repo, gate, monkeypatch):
    """The short answer checks out (its words are in the sentence) but, read again with that
    sentence, the model says it does not answer the question: refused as unsupported, saying so;
    with `generate.confirm_answer = false` the same answer is given."""
    def denies(body: dict) -> dict[str, float]:
        if confirms_the_sum(body) is not None:
            return {"Yes": -3.0, "No": -0.05}
        return names_the_sum(body)

    with LoopbackOpenAIServer(reply=says_the_number, top_logprobs=denies) as server:
        refused = ask(printer_repo, gate, server)
    assert refused.decision == "refused" and refused.reason == UNSUPPORTED and refused.citations == []
    assert "not confirmed" in refused.answer and f'"{ANSWER}"' in refused.answer
    assert [j["confirmed"] for j in refused.judged if "confirmed" in j] == [pytest.approx(0.05, abs=0.01)]
    monkeypatch.setenv("PAGERAG_GENERATE__CONFIRM_ANSWER", "false")
    with LoopbackOpenAIServer(reply=says_the_number, top_logprobs=denies) as server:
        given = ask(printer_repo, gate, server)
        assert not any(confirms_the_sum(b) is not None for b in server.bodies)
    assert given.decision == "answered" and given.answer == f"{ANSWER} [1]"


def test_the_best_excerpt_asked_anew_answers_when_the_picks_conversations_do_not(printer_repo, gate, monkeypatch):
    """In the pick's conversations the model answers NONE (it answers from the sentence it named);
    asked anew, without the number, it gives the sum: answered and cited with the sentence that
    states it (generate.answer_anew); without answer_anew, refused."""
    def anew_only(body: dict) -> str:
        if is_follow_up(body):
            return "NONE"
        if is_anew(body):
            return ANSWER if ANSWER in body["messages"][-1]["content"] else "NONE"
        return says_the_number(body)

    with LoopbackOpenAIServer(reply=anew_only, top_logprobs=names_the_sum) as server:
        answered = ask(printer_repo, gate, server)
        anew = [b for b in server.bodies if is_anew(b)]
    assert len(anew) == 1 and "sentence by sentence" not in anew[0]["messages"][-1]["content"]  # no numbers shown
    assert answered.decision == "answered" and answered.answer == f"{ANSWER} [1]"
    assert fold_space(answered.citations[0].quote) == BOOK_SENTENCE
    monkeypatch.setenv("PAGERAG_GENERATE__ANSWER_ANEW", "false")
    with LoopbackOpenAIServer(reply=anew_only, top_logprobs=names_the_sum) as server:
        refused = ask(printer_repo, gate, server)
        assert not any(is_anew(b) for b in server.bodies)
    assert refused.decision == "refused" and refused.reason == UNSUPPORTED
