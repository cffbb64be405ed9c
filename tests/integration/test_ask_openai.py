"""The full policy with the `openai` backend against a real loopback HTTP server.

With `generate.judge = "yesno"` (the default is `pick`: test_ask_pick.py) the LLM reads the first evidence passages one at a
time (generate.window_judge): a yes/no call per excerpt, P(yes) from the first token's
log-probabilities (the yes/no text when the server gives none), and, where P(yes) reaches the
threshold, a follow-up asking for the sentence that states the answer -- which must be in the
excerpt -- and the answer. The citation is that sentence as the book has it; the answer is the
model's short answer when the sentence bears it out, else the sentence itself. The threshold is
the calibrated one when `pagerag calibrate --llm` stored one for the backend and model, else 0.5.

With `generate.judge = "model"` the reader's sufficiency model decides and the LLM writes an answer
over numbered excerpts: the citation and grounding checks that refuse `unsupported_answer`.

Both record the tokens and latency of their stages. The loopback model decides what to reply by
reading the request, as a model would: whether the excerpt it is shown states the sum."""
from __future__ import annotations

import json
import re

import pytest
from ask_helpers import loopback_llm, permissive_gate
from helpers.openai_server import LoopbackOpenAIServer, words
from helpers.questions import ANSWER, ANSWERABLE, UNANSWERABLE, UNANSWERABLE_SUBJECT

from pagerag.api import PageRAG
from pagerag.generate.context import fold_space
from pagerag.llm import count_message_tokens, render_prompt
from pagerag.records import INSUFFICIENT, UNSUPPORTED

QUESTION = ANSWERABLE  # Novel-10146-a02 (training set): "$4,000"
# The book's sentence that states the sum (the training book's own text, whitespace folded)
BOOK_SENTENCE = ("The district court, subsequently confirmed by the supreme court, decided in favor of the "
                 "Minnesotian, and the day following the decision Mr. Moore, of the Minnesotian, brought down a bag "
                 "of gold from the capitol containing $4,000, and divided it up among his employes.")
# what the loopback model copies of it when asked for the quote: part of the sentence, in capitals
# of its own -- the citation must still be the whole sentence as the book writes it
COPIED = "MR. MOORE, of the Minnesotian, brought down a bag of gold from the capitol containing $4,000"
SHORT = "$4,000 in gold"  # the loopback model's short answer
YES = {"Yes": -0.1, "No": -2.4}  # P(yes) 0.91
NO = {"No": -0.05, "Yes": -3.2}  # P(yes) 0.04
# the judge prompt's closing instruction (after the fenced excerpt): how a request is recognised
JUDGE_ASK = render_prompt("judge_window", question="", excerpt="")[1]["content"].rsplit(">>>", 1)[1].strip()


# --------------------------------------------------------------------------------------------
# what the loopback model is asked, and what it says


def kind_of(body: dict) -> str:
    """yesno (log-probabilities asked), yesno-text (the same prompt, a reply wanted), quote (the
    follow-up), answer (prompts/answer, judge = model)."""
    messages = body["messages"]
    if len(messages) > 2:
        return "quote"
    if messages[-1]["content"].endswith(JUDGE_ASK):
        return "yesno" if body.get("logprobs") else "yesno-text"
    return "answer"


def fenced(body: dict) -> str:
    """The excerpt a judge request shows (between the fences of its user message)."""
    user = body["messages"][1]["content"]
    assert user.count("<<<") == 1 and user.count(">>>") == 1, user
    return user.split("<<<\n", 1)[1].split("\n>>>", 1)[0]


def states_the_sum(body: dict) -> bool:
    return ANSWER in fenced(body)


def oracle(body: dict) -> dict[str, float]:
    """P(yes) high where the excerpt shown states the sum, low elsewhere."""
    return YES if states_the_sum(body) else NO


def judge_reply(quote: str = COPIED, answer: str = SHORT):
    """The loopback model of the window judge: yes/no by the excerpt (as text, when asked for
    text), then QUOTE:/ANSWER: lines."""
    def reply(body: dict) -> str:
        if kind_of(body) == "quote":
            return f"QUOTE: {quote}\nANSWER: {answer}"
        return "yes" if states_the_sum(body) else "no"

    return reply


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    return permissive_gate(tmp_path_factory.mktemp("rcs"))


def ask(printer_repo, gate, server, question=QUESTION, **sections):
    # a lax sufficiency threshold unless a test sets one: the judge = model tests are about what follows it
    sections["generate"] = {"target_cwar": 0.99, "judge": "yesno", **sections.get("generate", {})}
    return PageRAG(printer_repo, llm=loopback_llm(server), confidence=gate, **sections).ask(question)


def evidence_passages(printer_repo, question: str, k: int) -> list[str]:
    """The first k distinct passages of the retrieval, in its order."""
    seen: list[str] = []
    for e in PageRAG(printer_repo, llm="extractive").retrieve(question).evidence:
        if e.passage_id not in seen:
            seen.append(e.passage_id)
    return seen[:k]


def book_text(printer_repo, citation) -> str:
    state = PageRAG(printer_repo, llm="extractive").state
    return state.source_text(citation.doc_id)[citation.start:citation.end]


# --------------------------------------------------------------------------------------------
# the window judge (judge = yesno)


def test_the_judge_reads_excerpts_one_at_a_time_and_answers_from_the_quoted_sentence(printer_repo, gate):
    with LoopbackOpenAIServer(reply=judge_reply(), top_logprobs=oracle) as server:
        answer = ask(printer_repo, gate, server)
        bodies = list(server.bodies)
    # excerpt [1] states the sum: judged yes, its quote asked for and found; no other excerpt is read
    assert [kind_of(b) for b in bodies] == ["yesno", "quote"]
    assert answer.decision == "answered" and answer.backend == "openai"
    assert [(j["n"], j["quote_found"]) for j in answer.judged] == [(1, True)]
    assert answer.judged[0]["passage_id"] == evidence_passages(printer_repo, QUESTION, 1)[0]
    assert answer.judged[0]["p_yes"] == pytest.approx(0.909, abs=0.001)
    assert answer.verdict.method == "llm-windows (uncalibrated)" and answer.verdict.sufficient
    assert answer.verdict.score == answer.judged[0]["p_yes"] and "1 of 4 excerpts read" in answer.verdict.detail
    # the yes/no prompt: the question, then one fenced excerpt -- the whole passage, as stored
    user = bodies[0]["messages"][1]["content"]
    assert user.index(f"Question: {QUESTION}") < user.index("<<<")
    state = PageRAG(printer_repo, llm="extractive").state
    assert fenced(bodies[0]) == fold_space(state.passage(answer.judged[0]["passage_id"]).text)
    # the follow-up goes on from the judge's conversation and its "yes"
    assert bodies[1]["messages"][:2] == bodies[0]["messages"]
    assert bodies[1]["messages"][2] == {"role": "assistant", "content": "yes"}
    # the citation: the whole sentence the model copied part of, as the book has it
    (cited,) = answer.citations
    assert cited.n == 1 and cited.passage_id == answer.judged[0]["passage_id"]
    assert cited.quote == book_text(printer_repo, cited) and fold_space(cited.quote) == BOOK_SENTENCE
    assert COPIED not in cited.quote  # the model's copy differs; the book's text is what is cited
    # the answer: the model's short answer, which the sentence bears out, and its excerpt's number
    assert answer.answer == f"{SHORT} [1]"
    # tokens are the server's (its word counts), all under "judge"; latency from the calls
    assert answer.tokens["judge"] == {
        "prompt": sum(words(" ".join(m["content"] for m in b["messages"])) for b in bodies),
        "completion": 1 + words(f"QUOTE: {COPIED}\nANSWER: {SHORT}")}
    assert answer.latency_ms["judge"] > 0 and "answer" not in answer.tokens
    # one passage a prompt: far below the answerer's evidence budget
    cfg = PageRAG(printer_repo).settings.generate
    assert count_message_tokens(bodies[0]["messages"]) < cfg.context_tokens


def test_a_quote_the_excerpt_does_not_hold_is_refused_as_unsupported(printer_repo, gate):
    # judged yes where the sum is stated, but the "quote" is a sentence the model made up
    invented = "Mr. Moore carried a bag of silver worth $5,000 down from the capitol."
    with LoopbackOpenAIServer(reply=judge_reply(quote=invented, answer="$5,000"), top_logprobs=oracle) as server:
        answer = ask(printer_repo, gate, server)
        bodies = list(server.bodies)
    # a quote not found does not end the reading: the other excerpts are judged (no, so no quote asked)
    assert [kind_of(b) for b in bodies] == ["yesno", "quote", "yesno", "yesno", "yesno"]
    assert [(j["n"], j["quote_found"]) for j in answer.judged] == [(1, False), (2, None), (3, None), (4, None)]
    assert answer.decision == "refused" and answer.reason == UNSUPPORTED
    assert answer.citations == [] and "$5,000" not in answer.answer and "quoted" in answer.answer
    assert answer.verdict.sufficient  # judged to state the answer: refused for the quote, not the evidence


def test_every_excerpt_judged_no_is_insufficient_evidence_without_a_quote_call(printer_repo, gate):
    with LoopbackOpenAIServer(reply=judge_reply(), top_logprobs=oracle) as server:
        answer = ask(printer_repo, gate, server, question=UNANSWERABLE)
        bodies = list(server.bodies)
    assert [kind_of(b) for b in bodies] == ["yesno"] * 4  # generate.judge_windows, no quote request
    assert answer.decision == "refused" and answer.reason == INSUFFICIENT and answer.citations == []
    # one entry per excerpt, numbered in the retrieval's order, each one passage of it
    passages = evidence_passages(printer_repo, UNANSWERABLE, 4)
    assert [j["passage_id"] for j in answer.judged] == passages and [j["n"] for j in answer.judged] == [1, 2, 3, 4]
    assert all(j["p_yes"] < 0.05 and j["quote_found"] is None for j in answer.judged)
    state = PageRAG(printer_repo, llm="extractive").state
    assert [fenced(b) for b in bodies] == [fold_space(state.passage(p).text) for p in passages]
    assert all(UNANSWERABLE in b["messages"][1]["content"] for b in bodies)
    assert answer.verdict.method == "llm-windows (uncalibrated)" and answer.verdict.score == max(
        j["p_yes"] for j in answer.judged)
    assert UNANSWERABLE_SUBJECT in answer.answer and "0.50" in answer.answer


@pytest.mark.parametrize("mode", ["reject_logprobs", "ignore_logprobs"])
def test_without_log_probabilities_the_yes_no_reply_decides(printer_repo, gate, mode):
    with LoopbackOpenAIServer(reply=judge_reply(), top_logprobs=YES, mode=mode) as server:
        rag = PageRAG(printer_repo, llm=loopback_llm(server), confidence=gate, generate={"judge": "yesno"})
        answer = rag.ask(QUESTION)
        first = [kind_of(b) for b in server.bodies]
        refused = rag.ask(UNANSWERABLE)
        second = [kind_of(b) for b in server.bodies][len(first):]
    # log-probabilities tried once, then the same prompt answered in words: "yes" is P(yes) 1
    assert first == ["yesno", "yesno-text", "quote"]
    assert answer.decision == "answered" and answer.answer == f"{SHORT} [1]"
    assert answer.judged[0]["p_yes"] == 1.0 and fold_space(answer.citations[0].quote) == BOOK_SENTENCE
    # the backend remembers: the next question's excerpts are judged in words only; "no" is P(yes) 0
    assert second == ["yesno-text"] * 4
    assert refused.reason == INSUFFICIENT and [j["p_yes"] for j in refused.judged] == [0.0] * 4


def test_a_calibrated_threshold_is_used_for_its_backend_and_model(printer_repo, gate, tmp_path, monkeypatch):
    from pagerag.generate.models import llm_decision_path
    from pagerag.llm import get_llm
    from pagerag.settings import load_settings

    monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path))
    with LoopbackOpenAIServer(reply=judge_reply(), top_logprobs=YES) as server:
        before = ask(printer_repo, gate, server)
        path = llm_decision_path(get_llm(load_settings(environ={}, llm=loopback_llm(server)).llm), "yesno")
        assert path == tmp_path / "calibration" / "openai-loopback-model.windows.json" and not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"tau": 0.95}), encoding="utf-8")
        server.bodies.clear()
        after = ask(printer_repo, gate, server)
        calls = [kind_of(b) for b in server.bodies]
    # uncalibrated, P(yes) 0.91 clears 0.5; calibrated at 0.95 it does not
    assert before.decision == "answered" and before.verdict.method == "llm-windows (uncalibrated)"
    assert after.decision == "refused" and after.reason == INSUFFICIENT and after.verdict.method == "llm-windows"
    assert after.verdict.score == pytest.approx(0.909, abs=0.001) and "tau 0.95" in after.verdict.detail
    assert "0.95" in after.answer and calls == ["yesno"] * 4  # below tau everywhere: no quote asked


def test_a_contrast_threshold_answers_only_where_one_excerpt_stands_out(printer_repo, gate, tmp_path, monkeypatch):
    """Calibrated with the contrast score (the best excerpt's logit above the mean of the others'),
    every excerpt is judged before the decision; a model that says yes to every excerpt alike does
    not answer, one whose yes stands out on the excerpt stating the sum does, from that excerpt."""
    from pagerag.generate.models import llm_decision_path
    from pagerag.llm import get_llm
    from pagerag.settings import load_settings

    monkeypatch.setenv("PAGERAG_CACHE_DIR", str(tmp_path))
    with LoopbackOpenAIServer(reply=judge_reply(), top_logprobs=YES) as server:
        path = llm_decision_path(get_llm(load_settings(environ={}, llm=loopback_llm(server)).llm), "yesno")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"tau": 1.0, "feature": "contrast"}), encoding="utf-8")
        alike = ask(printer_repo, gate, server)
        alike_calls = [kind_of(b) for b in server.bodies]
    with LoopbackOpenAIServer(reply=judge_reply(), top_logprobs=oracle) as server:
        stands_out = ask(printer_repo, gate, server)
        calls = [kind_of(b) for b in server.bodies]
        quoted = [fenced(b) for b in server.bodies if kind_of(b) == "quote"]
    assert alike.decision == "refused" and alike.reason == INSUFFICIENT and "contrast 0.00" in alike.verdict.detail
    assert alike_calls == ["yesno"] * 4  # all judged, no quote asked
    assert stands_out.decision == "answered" and stands_out.verdict.method == "llm-windows"
    assert calls == ["yesno"] * 4 + ["quote"] and ANSWER in quoted[0]  # the quote asked of the excerpt that stood out
    assert fold_space(stands_out.citations[0].quote) == BOOK_SENTENCE


@pytest.mark.parametrize("short", [SHORT.replace("4,000", "5,000"), "Little Crow brought $4,000",
                                   "The ship sailed away over the sea at dawn"])
def test_an_answer_its_quote_does_not_bear_out_gives_way_to_the_quoted_sentence(printer_repo, gate, short):
    # a number, a name (in the book, not in the sentence), words: none of them in the quoted sentence
    with LoopbackOpenAIServer(reply=judge_reply(answer=short), top_logprobs=oracle) as server:
        answer = ask(printer_repo, gate, server)
    (cited,) = answer.citations
    assert answer.decision == "answered" and fold_space(cited.quote) == BOOK_SENTENCE
    assert answer.answer == f"\u201c{BOOK_SENTENCE}\u201d [{cited.n}]"
    assert short not in answer.answer and any("not borne out" in note for note in answer.notes)


# --------------------------------------------------------------------------------------------
# judge = model: the reader's model decides, the LLM answers over numbered excerpts

# the loopback LLM's answer: the words of the excerpt that states the sum, citing that excerpt's
# number ({n}: the excerpts come in the policy's order, not necessarily with that one first)
REPLY = "Mr. Moore brought down a bag of gold containing $4,000 [{n}]."
MODEL = {"judge": "model"}


def sum_excerpt(user: str) -> int:
    """The number of the first excerpt in an answer prompt that states the sum."""
    excerpts = re.findall(r"^\[(\d+)\] (.*?)(?=\n\n\[\d+\] |\n>>>)", user, re.M | re.S)
    return next(int(n) for n, text in excerpts if ANSWER in text)


def replies(answer: str = REPLY):
    def reply(body: dict) -> str:
        assert kind_of(body) == "answer", "judge = model asks the LLM for nothing but the answer"
        return answer.format(n=sum_excerpt(body["messages"][-1]["content"])) if "{n}" in answer else answer

    return reply


def ask_model(printer_repo, gate, server, question=QUESTION, **generate):
    return ask(printer_repo, gate, server, question, generate={**MODEL, **generate})


def test_judge_model_the_reader_decides_and_the_llm_writes_a_cited_answer(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(), top_logprobs=YES) as server:
        answer = ask_model(printer_repo, gate, server)
        bodies = list(server.bodies)
    assert [kind_of(b) for b in bodies] == ["answer"]  # no yes/no call
    user = bodies[0]["messages"][1]["content"]
    n = sum_excerpt(user)
    assert answer.decision == "answered" and answer.answer == REPLY.format(n=n)
    assert answer.verdict.method == "model" and 0.0 < answer.verdict.score < 1.0 and answer.judged == []
    assert answer.citations[0].n == n and answer.backend == "openai"
    # the excerpts the model saw are fenced, numbered, and [n] is the one cited
    assert "<<<\n[1] " in user and "\n>>>" in user and ANSWER in answer.citations[0].quote
    assert " ".join(answer.citations[0].quote.split()) in user
    # tokens come from the server's usage (its word counts), latency from the calls
    assert answer.tokens["answer"]["prompt"] > 0 and answer.tokens["answer"]["completion"] == len(REPLY.split())
    assert not answer.tokens.get("judge", {}).get("prompt") and answer.latency_ms["answer"] > 0
    # the prompt stays within its evidence budget, the graph context's and the template's (tiktoken)
    cfg = PageRAG(printer_repo).settings.generate
    assert count_message_tokens(bodies[0]["messages"]) <= cfg.context_tokens + cfg.graph_context_tokens + 250


def test_judge_model_a_refusal_below_tau_composes_no_answer(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(), top_logprobs=YES) as server:
        answer = ask_model(printer_repo, gate, server, target_cwar=0.0001)
        calls = len(server.bodies)
    assert answer.decision == "refused" and answer.reason == INSUFFICIENT
    assert answer.verdict.method == "model" and not answer.verdict.sufficient
    assert calls == 0  # the reader's model refused: the LLM was not asked


def test_answer_without_a_valid_citation_is_refused(printer_repo, gate):
    for text in (REPLY.replace(" [{n}]", ""), REPLY.replace("[{n}]", "[99]")):
        with LoopbackOpenAIServer(reply=replies(answer=text)) as server:
            answer = ask_model(printer_repo, gate, server, attribute_uncited=False)
        assert answer.decision == "refused" and answer.reason == UNSUPPORTED, text
        assert answer.citations == []


def test_uncited_answer_is_cited_only_when_an_excerpt_bears_it_out(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(answer=REPLY.replace(" [{n}]", ""))) as server:
        answer = ask_model(printer_repo, gate, server)
    assert answer.decision == "answered" and answer.answer.endswith(f"[{answer.citations[0].n}]")
    assert ANSWER in answer.citations[0].quote and any("bears it out" in n for n in answer.notes)
    with LoopbackOpenAIServer(reply=replies(answer="The ship left Bristol at dawn.")) as server:
        answer = ask_model(printer_repo, gate, server)
    assert answer.reason == UNSUPPORTED


def test_invalid_citation_marks_are_removed_and_noted(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(answer="A bag of gold containing $4,000 [{n}][99].")) as server:
        answer = ask_model(printer_repo, gate, server)
        n = sum_excerpt(server.bodies[-1]["messages"][-1]["content"])
    assert answer.decision == "answered" and answer.answer == f"A bag of gold containing $4,000 [{n}]."
    assert [c.n for c in answer.citations] == [n]
    assert any("[99]" in note for note in answer.notes)


def test_answer_the_cited_excerpts_do_not_bear_out_is_refused(printer_repo, gate):
    # no name or number to fail the grounding check: only its words are not in any excerpt
    with LoopbackOpenAIServer(reply=replies(answer="The ship sailed away over the sea at dawn [1].")) as server:
        answer = ask_model(printer_repo, gate, server)
    assert answer.decision == "refused" and answer.reason == UNSUPPORTED
    assert "not borne out" in answer.answer


def test_answerer_may_still_abstain(printer_repo, gate):
    with LoopbackOpenAIServer(reply=replies(answer="INSUFFICIENT")) as server:
        answer = ask_model(printer_repo, gate, server)
    assert answer.reason == INSUFFICIENT and "answerer" in answer.answer


def test_grounding_a_number_the_cited_excerpt_does_not_state_is_unsupported(printer_repo, gate):
    """'... containing $5,000 [n]' against '... containing $4,000' (excerpt [n]): most of its words
    are in the excerpt or the question, but its number is not, so it is refused."""
    with LoopbackOpenAIServer(reply=replies(answer=REPLY.replace("$4,000", "$5,000"))) as server:
        answer = ask_model(printer_repo, gate, server)
        user = server.bodies[-1]["messages"][1]["content"]
    assert sum_excerpt(user)  # an excerpt states the sum: the one the answer cites
    assert answer.decision == "refused" and answer.reason == UNSUPPORTED
    assert "'5000'" in answer.answer and answer.citations == []
    with LoopbackOpenAIServer(reply=replies(answer=REPLY.replace("Mr. Moore", "Little Crow"))) as server:
        named = ask_model(printer_repo, gate, server)
    # a name must be in the cited excerpt too (Little Crow is in the book, not in the excerpt on the gold)
    assert named.reason == UNSUPPORTED and "Little Crow" in named.answer


def echo_first_excerpt(body: dict) -> str:
    """An answer made of the first excerpt's opening words, cited: supported by construction."""
    user = body["messages"][-1]["content"]
    return " ".join(user.split("[1] ", 1)[1].split()[:8]) + " [1]."


def test_ablation_prompt_offers_no_way_out(printer_repo, gate):
    # no evidence constraint: no judge of either kind, whatever generate.judge says
    with LoopbackOpenAIServer(reply=echo_first_excerpt) as server:
        answer = PageRAG(printer_repo, pipeline="no-evidence-constraint", llm=loopback_llm(server),
                         confidence=gate).ask(UNANSWERABLE)
        bodies = list(server.bodies)
    assert [kind_of(b) for b in bodies] == ["answer"]
    assert "INSUFFICIENT" not in bodies[0]["messages"][1]["content"]
    assert answer.decision == "answered" and answer.verdict.method == "skipped" and answer.judged == []
    assert answer.citations[0].n == 1
