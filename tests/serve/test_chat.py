"""The OpenAI-compatible endpoints through the `openai` SDK: one model per repository, the
answer with numbered footnotes, a refusal as an ordinary message that says why, streaming and
not, usage filled in."""
from __future__ import annotations

import re

import openai
import pytest
from serving import ANSWERABLE, UNANSWERABLE


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=served.url + "/v1", api_key="not-needed-on-loopback", max_retries=0, timeout=120)


def test_models_are_the_served_repositories(client):
    ids = {m.id for m in client.models.list()}
    assert {"carol", "swap"} <= ids


def test_answer_carries_its_citations_as_numbered_footnotes(client):
    reply = client.chat.completions.create(model="carol", messages=[
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Who is Marley?"},
        {"role": "assistant", "content": "Scrooge's late partner."},
        {"role": "user", "content": ANSWERABLE},  # the last user message is the question
    ])
    content = reply.choices[0].message.content
    assert reply.choices[0].finish_reason == "stop" and reply.model == "carol"
    assert "fifteen shillings" in content
    footnote = re.search(r"^\[1\] carol_excerpt\.txt, line (\d+): \u201c.+\u201d$", content, re.M)
    assert footnote, content
    assert "[1]" in content.split("\n\n")[0]  # the marker in the answer points at the footnote
    extra = reply.model_extra["pagerag"]
    assert extra["decision"] == "answered" and extra["citations"][0]["line"] == int(footnote.group(1))
    usage = reply.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_refusal_is_an_ordinary_message_that_says_why(client):
    reply = client.chat.completions.create(model="carol", messages=[{"role": "user", "content": UNANSWERABLE}])
    content = reply.choices[0].message.content
    assert reply.choices[0].message.role == "assistant"
    assert content.startswith("I can't answer that") and "insufficient_evidence" in content and "Fred" in content
    assert reply.model_extra["pagerag"]["reason"] == "insufficient_evidence"


def test_streamed_reply_is_the_same_text_with_usage_at_the_end(client):
    whole = client.chat.completions.create(model="carol", messages=[{"role": "user", "content": ANSWERABLE}])
    stream = client.chat.completions.create(model="carol", messages=[{"role": "user", "content": ANSWERABLE}],
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
    assert "carol" in str(caught.value)  # names the models that exist


def test_no_user_message_is_a_bad_request(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="carol", messages=[{"role": "system", "content": "hello"}])
    assert "user message" in str(caught.value)
