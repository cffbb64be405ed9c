"""The full policy with the `openai` backend against a real loopback HTTP server: once the
loopback model is calibrated (`pagerag calibrate --llm`'s fit), its P(yes) weighed with the
reader's P(sufficient) (and the reader's model alone when the server gives no log-probabilities), cited answers, the citation and grounding checks that refuse
`unsupported_answer`, and the tokens/latency each stage records."""
from __future__ import annotations

import re

import pytest
from ask_helpers import loopback_llm, permissive_gate
from helpers.openai_server import LoopbackOpenAIServer
from helpers.questions import ANSWER, ANSWERABLE, UNANSWERABLE

from pagerag.api import PageRAG
from pagerag.llm import count_message_tokens
from pagerag.records import INSUFFICIENT, UNSUPPORTED

QUESTION = ANSWERABLE  # Novel-10146-a02 (training set): "$4,000"
# the loopback LLM's answer: the words of the excerpt that states the sum, citing that excerpt's
# number ({n}: the excerpts come in the policy's order, not necessarily with that one first)
REPLY = "Mr. Moore brought down a bag of gold containing $4,000 [{n}]."
YES = {"Yes": -0.1, "No": -2.4}
NO = {"No": -0.05, "Yes": -3.2}


def kind_of(body: dict) -> str:
    return "yesno" if body.get("logprobs") else "answer"


def sum_excerpt(user: str) -> int:
    """The number of the first excerpt in an answer prompt that states the sum."""
    excerpts = re.findall(r"^\[(\d+)\] (.*?)(?=\n\n\[\d+\] |\n>>>)", user, re.M | re.S)
    return next(int(n) for n, text in excerpts if ANSWER in text)


def replies(answer: str = REPLY):
    def reply(body: dict) -> str:
        if kind_of(body) == "yesno":
            return "Yes"
        return answer.format(n=sum_excerpt(body["messages"][-1]["content"])) if "{n}" in answer else answer

    return reply


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    return permissive_gate(tmp_path_factory.mktemp("rcs"))


@pytest.fixture(scope="module", autouse=True)
def calibrated(tmp_path_factory):
    """The loopback model calibrated as `pagerag calibrate --llm openai` does (the packaged sample,
    a model knowing its labels), in a cache of this module's own: only then does `ask` weigh the
    LLM's P(yes) with the reader. Returns the fitted decision."""
    from pagerag.evaluate.llm_calibration import calibrate_llm, read_sample
    from pagerag.generate.models import CALIBRATION_SAMPLE, llm_decision_path
    from pagerag.llm import get_llm
    from pagerag.settings import load_settings

    rows = [r for r in read_sample(CALIBRATION_SAMPLE) if r.get("label") is not None][:40]
    supported = [r["question"] for r in rows if r["label"] == 1]

    def logprobs(body: dict) -> dict[str, float]:
        known = any(q in body["messages"][-1]["content"] for q in supported)
        return {"Yes": -0.05, "No": -3.0} if known else {"Yes": -3.0, "No": -0.05}

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PAGERAG_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        with LoopbackOpenAIServer(top_logprobs=logprobs) as server:
            llm = get_llm(load_settings(environ={}, llm=loopback_llm(server)).llm)
            model, _ = calibrate_llm(llm, CALIBRATION_SAMPLE, None, limit=len(rows))
            model.save(llm_decision_path(llm))
        yield model


def ask(printer_repo, gate, server, question=QUESTION, **sections):
    # a lax sufficiency threshold unless a test sets one: these tests are about what follows it
    sections["generate"] = {"target_cwar": 0.99, **sections.get("generate", {})}
    return PageRAG(printer_repo, llm=loopback_llm(server), confidence=gate, **sections).ask(question)


def test_p_yes_feeds_the_llm_sufficiency_model_then_a_cited_answer(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(), top_logprobs=YES) as server:
        answer = ask(printer_repo, gate, server)
        bodies = list(server.bodies)
    assert [kind_of(b) for b in bodies] == ["yesno", "answer"]
    user = bodies[1]["messages"][1]["content"]
    n = sum_excerpt(user)
    assert answer.decision == "answered" and answer.answer == REPLY.format(n=n)
    assert answer.verdict.method == "model+llm" and "P(yes) 0.91" in answer.verdict.detail
    assert 0.0 < answer.verdict.score < 1.0
    assert answer.citations[0].n == n and answer.backend == "openai"
    # the excerpts the model saw are fenced, numbered, and [n] is the one cited
    assert "<<<\n[1] " in user and "\n>>>" in user and ANSWER in answer.citations[0].quote
    assert " ".join(answer.citations[0].quote.split()) in user
    # tokens come from the server's usage (its word counts), latency from the calls
    assert answer.tokens["judge"]["prompt"] > 0 and answer.tokens["answer"]["completion"] == len(REPLY.split())
    assert answer.latency_ms["judge"] > 0 and answer.latency_ms["answer"] > 0
    # each prompt stays within its evidence budget, the graph context's and the template's (tiktoken):
    # the yes/no call reads the first excerpts (judge_context_tokens), the answer all of them (context_tokens)
    cfg = PageRAG(printer_repo).settings.generate
    judge_tokens, answer_tokens = (count_message_tokens(b["messages"]) for b in bodies)
    assert judge_tokens <= cfg.judge_context_tokens + cfg.graph_context_tokens + 250
    assert answer_tokens <= cfg.context_tokens + cfg.graph_context_tokens + 250
    assert judge_tokens < answer_tokens


def test_the_llms_p_yes_moves_p_sufficient_the_way_the_fitted_model_weighs_it(printer_repo, gate, calibrated):
    from pagerag.generate.sufficiency import LLM_FEATURE

    weight = calibrated.weights[calibrated.feature_names.index(LLM_FEATURE)]
    scores = {}
    for name, logprobs in (("yes", YES), ("no", NO)):
        with LoopbackOpenAIServer(reply=replies(), top_logprobs=logprobs) as server:
            scores[name] = ask(printer_repo, gate, server).verdict.score
    assert (scores["yes"] > scores["no"]) == (weight > 0) and scores["yes"] != scores["no"]


def test_a_refusal_below_tau_composes_no_answer(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(), top_logprobs=NO) as server:
        answer = ask(printer_repo, gate, server, generate={"target_cwar": 0.0001})
        calls = len(server.bodies)
    assert answer.decision == "refused" and answer.reason == INSUFFICIENT
    assert answer.verdict.method == "model+llm" and "P(yes) 0.04" in answer.verdict.detail
    assert calls == 1  # the yes/no call only: no answer was composed


def test_without_log_probabilities_the_no_llm_model_decides(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(), mode="reject_logprobs") as server:
        answer = ask(printer_repo, gate, server)
        kinds = [kind_of(b) for b in server.bodies]
    assert kinds == ["yesno", "answer"]  # tried log-probabilities once, then answered
    assert answer.verdict.method == "model" and answer.decision == "answered"
    with LoopbackOpenAIServer(reply=replies()) as server:
        answer = ask(printer_repo, gate, server, generate={"judge": "model"})
        assert [kind_of(b) for b in server.bodies] == ["answer"]  # judge = model: no yes/no call
    assert answer.verdict.method == "model"


def test_answer_without_a_valid_citation_is_refused(printer_repo, gate):
    for text in (REPLY.replace(" [{n}]", ""), REPLY.replace("[{n}]", "[99]")):
        with LoopbackOpenAIServer(reply=replies(answer=text), top_logprobs=YES) as server:
            answer = ask(printer_repo, gate, server, generate={"attribute_uncited": False})
        assert answer.decision == "refused" and answer.reason == UNSUPPORTED, text
        assert answer.citations == []


def test_uncited_answer_is_cited_only_when_an_excerpt_bears_it_out(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(answer=REPLY.replace(" [{n}]", "")), top_logprobs=YES) as server:
        answer = ask(printer_repo, gate, server)
    assert answer.decision == "answered" and answer.answer.endswith(f"[{answer.citations[0].n}]")
    assert ANSWER in answer.citations[0].quote and any("bears it out" in n for n in answer.notes)
    with LoopbackOpenAIServer(reply=replies(answer="The ship left Bristol at dawn."), top_logprobs=YES) as server:
        answer = ask(printer_repo, gate, server)
    assert answer.reason == UNSUPPORTED


def test_invalid_citation_marks_are_removed_and_noted(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(answer="A bag of gold containing $4,000 [{n}][99]."),
                              top_logprobs=YES) as server:
        answer = ask(printer_repo, gate, server)
        n = sum_excerpt(server.bodies[-1]["messages"][-1]["content"])
    assert answer.decision == "answered" and answer.answer == f"A bag of gold containing $4,000 [{n}]."
    assert [c.n for c in answer.citations] == [n]
    assert any("[99]" in note for note in answer.notes)


def test_answer_the_cited_excerpts_do_not_bear_out_is_refused(printer_repo, gate):
    # no name or number to fail the grounding check: only its words are not in any excerpt
    with LoopbackOpenAIServer(reply=replies(answer="The ship sailed away over the sea at dawn [1]."),
                              top_logprobs=YES) as server:
        answer = ask(printer_repo, gate, server)
    assert answer.decision == "refused" and answer.reason == UNSUPPORTED
    assert "not borne out" in answer.answer


def test_answerer_may_still_abstain(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(answer="INSUFFICIENT"), top_logprobs=YES) as server:
        answer = ask(printer_repo, gate, server)
    assert answer.reason == INSUFFICIENT and "answerer" in answer.answer


def test_grounding_a_number_the_cited_excerpt_does_not_state_is_unsupported(printer_repo, gate):
    """'... containing $5,000 [n]' against '... containing $4,000' (excerpt [n]): most of its words
    are in the excerpt or the question, but its number is not, so it is refused."""
    with LoopbackOpenAIServer(reply=replies(answer=REPLY.replace("$4,000", "$5,000")), top_logprobs=YES) as server:
        answer = ask(printer_repo, gate, server)
        user = server.bodies[-1]["messages"][1]["content"]
    assert sum_excerpt(user)  # an excerpt states the sum: the one the answer cites
    assert answer.decision == "refused" and answer.reason == UNSUPPORTED
    assert "'5000'" in answer.answer and answer.citations == []
    with LoopbackOpenAIServer(reply=replies(answer=REPLY.replace("Mr. Moore", "Little Crow")),
                              top_logprobs=YES) as server:
        named = ask(printer_repo, gate, server)
    # a name must be in the cited excerpt too (Little Crow is in the book, not in the excerpt on the gold)
    assert named.reason == UNSUPPORTED and "Little Crow" in named.answer


def echo_first_excerpt(body: dict) -> str:
    """An answer made of the first excerpt's opening words, cited: supported by construction."""
    user = body["messages"][-1]["content"]
    return " ".join(user.split("[1] ", 1)[1].split()[:8]) + " [1]."


def test_ablation_prompt_offers_no_way_out(printer_repo, gate):
    with LoopbackOpenAIServer(reply=echo_first_excerpt) as server:
        answer = PageRAG(printer_repo, pipeline="no-evidence-constraint", llm=loopback_llm(server),
                         confidence=gate).ask(UNANSWERABLE)
        bodies = list(server.bodies)
    assert [kind_of(b) for b in bodies] == ["answer"]
    assert "INSUFFICIENT" not in bodies[0]["messages"][1]["content"]
    assert answer.decision == "answered" and answer.verdict.method == "skipped"
    assert answer.citations[0].n == 1
