"""The OpenAI-compatible endpoints through the `openai` SDK: one model per repository, the
answer with numbered footnotes, a refusal as an ordinary message that says why, streaming and
not, usage filled in, and a conversation: a follow-up is answered as the standalone question the
earlier turns make of it (by the LLM when one is configured, else by resolving pronouns)."""
from __future__ import annotations

import json
import re

import httpx
import openai
import pytest
from helpers.openai_server import LoopbackOpenAIServer
from serving import ANSWER, ANSWERABLE, REPO, UNANSWERABLE, UNANSWERABLE_SUBJECT, ThreadServer


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=served.url + "/v1", api_key="not-needed-on-loopback", max_retries=0, timeout=120)


def test_models_are_the_served_repositories(client):
    ids = {m.id for m in client.models.list()}
    assert {REPO, "swap"} <= ids


def test_answer_carries_its_citations_as_numbered_footnotes(client):
    reply = client.chat.completions.create(model=REPO, messages=[
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Who was Dr. Foster?"},
        {"role": "assistant", "content": "The editor of the Minnesotian."},
        {"role": "user", "content": ANSWERABLE},  # the last user message is the question
    ])
    content = reply.choices[0].message.content
    assert reply.choices[0].finish_reason == "stop" and reply.model == REPO
    assert ANSWER in content and content.startswith("Closest passage (offline, the reader cannot check")
    footnote = re.search(r"^\[1\] printer_excerpt\.txt, line (\d+): \u201c.+\u201d$", content, re.M)
    assert footnote, content
    assert "[1]" in content.split("\n\n")[0]  # the marker in the answer points at the footnote
    extra = reply.model_extra["pagerag"]
    assert extra["label"] == "closest_passage"
    assert extra["decision"] == "answered" and extra["citations"][0]["line"] == int(footnote.group(1))
    usage = reply.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_refusal_is_an_ordinary_message_that_says_why(client):
    reply = client.chat.completions.create(model=REPO, messages=[{"role": "user", "content": UNANSWERABLE}],
                                           extra_body={"pipeline": "reader-decides"})
    content = reply.choices[0].message.content
    assert reply.choices[0].message.role == "assistant"
    assert content.startswith("I can't answer that") and "insufficient_evidence" in content
    assert UNANSWERABLE_SUBJECT in content
    assert reply.model_extra["pagerag"]["reason"] == "insufficient_evidence"


def test_streamed_reply_is_the_same_text_with_usage_at_the_end(client):
    whole = client.chat.completions.create(model=REPO, messages=[{"role": "user", "content": ANSWERABLE}])
    stream = client.chat.completions.create(model=REPO, messages=[{"role": "user", "content": ANSWERABLE}],
                                            stream=True, stream_options={"include_usage": True})
    pieces, usage, finish = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert len([p for p in pieces if p]) > 1  # really streamed in pieces
    assert "".join(pieces) == whole.choices[0].message.content
    assert finish == "stop"
    assert usage is not None and usage.total_tokens == whole.usage.total_tokens > 0


def test_unknown_model_is_a_clear_error(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": ANSWERABLE}])
    assert REPO in str(caught.value)  # names the models that exist


def test_no_user_message_is_a_bad_request(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=REPO, messages=[{"role": "system", "content": "hello"}])
    assert "user message" in str(caught.value)


def test_stream_must_be_a_boolean(served):
    for value in ("yes", 1, "true"):
        response = httpx.post(served.url + "/v1/chat/completions", timeout=60, json={
            "model": REPO, "messages": [{"role": "user", "content": ANSWERABLE}], "stream": value})
        assert response.status_code == 422, (value, response.text)
        assert response.json()["error"]["message"].startswith("stream:")


# ---- conversations ----------------------------------------------------------------------------

FIRST = "Who was Dr. Foster?"
FOLLOW_UP = "Which paper did he edit?"
STANDALONE = "Which paper did Dr. Foster edit?"  # "he" is the Dr. Foster of the previous question


def test_a_follow_up_is_answered_as_the_standalone_question_of_the_conversation(client):
    first = client.chat.completions.create(model=REPO, messages=[{"role": "user", "content": FIRST}])
    history = [{"role": "user", "content": FIRST},
               {"role": "assistant", "content": first.choices[0].message.content}]
    second = client.chat.completions.create(model=REPO, messages=[*history, {"role": "user", "content": FOLLOW_UP}])
    extra = second.model_extra["pagerag"]
    assert extra["question"] == STANDALONE
    assert extra["rewritten_from"] == FOLLOW_UP and extra["rewrite"] == "pronouns"
    content = second.choices[0].message.content
    direct = client.chat.completions.create(model=REPO, messages=[{"role": "user", "content": STANDALONE}])
    # the reply says what it answered, then is exactly the answer to that standalone question
    assert content == f"Answering: \u201c{STANDALONE}\u201d\n\n" + direct.choices[0].message.content

    alone = client.chat.completions.create(model=REPO, messages=[{"role": "user", "content": FOLLOW_UP}])
    assert alone.model_extra["pagerag"]["question"] == FOLLOW_UP and alone.model_extra["pagerag"]["rewrite"] is None
    assert not alone.choices[0].message.content.startswith("Answering:")

    streamed = client.chat.completions.create(model=REPO, stream=True,
                                              messages=[*history, {"role": "user", "content": FOLLOW_UP}])
    chunks = list(streamed)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == content
    assert [c.model_extra.get("pagerag") for c in chunks if c.model_extra.get("pagerag")][0]["question"] == STANDALONE


def test_with_an_llm_the_llm_makes_the_question_standalone(printer_repo):
    from pagerag.serve.config import ServeConfig

    standalone = ANSWERABLE

    def reply(body: dict) -> str:
        prompt = " ".join(str(m.get("content", "")) for m in body["messages"])
        if "stands alone" in prompt:  # prompts/rewrite_question
            return json.dumps({"question": standalone})
        return "Yes" if body.get("logprobs") else f"He carried {ANSWER} in gold [1]."

    with LoopbackOpenAIServer(reply=reply) as llm:
        config = ServeConfig(repos={REPO: printer_repo}, llm="openai", warm=False, sets=[
            f"llm.base_url={llm.base_url}", "llm.model=loopback-model", "llm.cache=false", "llm.max_retries=0"]).check()
        with ThreadServer(config) as server:
            client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
            reply_ = client.chat.completions.create(model=REPO, messages=[
                {"role": "user", "content": "Who brought the bag of gold down from the capitol?"},
                {"role": "assistant", "content": "Mr. Moore [1]\n\n[1] printer_excerpt.txt, line 1: \u201c...\u201d"},
                {"role": "user", "content": "How much was in it?"}])
    rewrite = [b for b in llm.bodies if "stands alone" in json.dumps(b)]
    assert len(rewrite) == 1
    prompt = rewrite[0]["messages"][-1]["content"]
    assert "Who brought the bag of gold down from the capitol?" in prompt and "Mr. Moore" in prompt  # the earlier turns
    assert "printer_excerpt.txt, line 1" not in prompt  # footnotes are not conversation
    assert "Last question: How much was in it?" in prompt
    extra = reply_.model_extra["pagerag"]
    assert extra["question"] == standalone and extra["rewrite"] == "llm"
    assert extra["rewritten_from"] == "How much was in it?"
    assert reply_.choices[0].message.content.startswith(f"Answering: \u201c{standalone}\u201d")
    assert reply_.usage.prompt_tokens >= len(prompt.split())  # the rewrite's tokens are counted
