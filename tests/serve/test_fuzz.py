"""Whatever text a client sends — random unicode, control characters, lone surrogates, very long
runs — the server answers, refuses or says what is wrong in one line (4xx); it never fails with
a 500. Requests are sent as JSON with \\u escapes, the only way a lone surrogate can travel."""
from __future__ import annotations

import json
import os

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serving import ANSWERABLE, REPO

# every code point, surrogates (category Cs) and control characters included
ANY_CHAR = st.characters(codec=None, exclude_categories=())
CONTROL = st.sampled_from([chr(c) for c in [*range(0, 32), 127, *range(0x80, 0xA0)]] + ["\u2028", "\u200b", "\ufeff"])
SURROGATE = st.integers(0xD800, 0xDFFF).map(chr)
RUN = st.tuples(st.one_of(ANY_CHAR, CONTROL, st.just(" "), st.just("a")), st.integers(1, 2600)).map(lambda cn: cn[0] * cn[1])
TEXT = st.one_of(
    st.text(ANY_CHAR, max_size=300),
    st.text(st.one_of(CONTROL, SURROGATE, st.sampled_from("Foster Minnesotian ?")), max_size=80),
    RUN,
    st.tuples(st.sampled_from([ANSWERABLE, "Who was Dr. Foster?"]), st.text(st.one_of(CONTROL, SURROGATE), min_size=1, max_size=5),
              st.integers(0, 40)).map(lambda t: t[0][: t[2]] + t[1] + t[0][t[2]:]),  # a real question, spoiled
)
# a fixed, quick sample in CI; PAGERAG_FUZZ_EXAMPLES=500 explores more
FUZZ = settings(max_examples=int(os.environ.get("PAGERAG_FUZZ_EXAMPLES", "25")), deadline=None, database=None,
                derandomize=os.environ.get("PAGERAG_FUZZ_EXAMPLES") is None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def post(url: str, body: dict) -> httpx.Response:
    # ensure_ascii: a lone surrogate goes as the escape "\ud800", as a JSON client would send it
    return httpx.post(url, content=json.dumps(body, ensure_ascii=True), timeout=300,
                      headers={"Content-Type": "application/json"})


def assert_handled(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    data = response.json()
    if response.status_code >= 400:
        error = data["error"]
        assert error["status"] == response.status_code and "\n" not in error["message"]
        assert "Traceback" not in response.text and "TextEncodeInput" not in response.text


@pytest.mark.parametrize("endpoint", ["/v1/ask", "/v1/retrieve"])
def test_question_fields_never_give_a_500(served, endpoint):
    @FUZZ
    @given(question=TEXT)
    def check(question):
        assert_handled(post(served.url + endpoint, {"question": question, "repo": REPO}))

    check()


def test_chat_messages_never_give_a_500(served):
    @FUZZ
    @given(first=TEXT, last=TEXT, parts=st.booleans())
    def check(first, last, parts):
        content = [{"type": "text", "text": last}] if parts else last
        messages = [{"role": "user", "content": first}, {"role": "assistant", "content": "The editor of the Minnesotian."},
                    {"role": "user", "content": content}]
        assert_handled(post(served.url + "/v1/chat/completions", {"model": REPO, "messages": messages}))

    check()


def test_a_lone_surrogate_is_a_400_that_names_the_field(served):
    for endpoint, body, field in (
            ("/v1/ask", {"question": "Who was \ud800Foster?", "repo": REPO}, "question"),
            ("/v1/retrieve", {"question": "\udfff", "repo": REPO}, "question"),
            ("/v1/ask", {"question": ANSWERABLE, "repo": "prin\ud800ter"}, "repo"),
            ("/v1/chat/completions", {"model": REPO, "messages": [{"role": "user", "content": "Who\ud800?"}]},
             "messages[0].content"),
            ("/v1/chat/completions", {"model": "pri\udc00nter", "messages": [{"role": "user", "content": "Who?"}]}, "model"),
            ("/v1/builds", {"path": "books\ud800", "repo": "x"}, "path"),
    ):
        response = post(served.url + endpoint, body)
        assert response.status_code == 400, (endpoint, response.text)
        message = response.json()["error"]["message"]
        assert message.startswith(f"{field}: not valid text") and "surrogate" in message, message
