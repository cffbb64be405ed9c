"""The `openai` backend against a real loopback HTTP server (tests/helpers/openai_server.py):
replies, usage, streaming, JSON mode, yes/no log-probabilities, and every fault mode ending in
one BackendError line within a bounded time."""
from __future__ import annotations

import math
import socket
import time

import pytest

from helpers.openai_server import LoopbackOpenAIServer, words
from pagerag.errors import BackendError
from pagerag.llm.openai_backend import OpenAIBackend
from pagerag.llm import Completion, complete_json, count_message_tokens
from pagerag.offline import count_tokens
from pagerag.settings import LLMSettings

QUESTION = [{"role": "system", "content": "Answer from the evidence only."},
            {"role": "user", "content": "Who signed the register of Marley's burial?"}]


def backend(server: LoopbackOpenAIServer, **overrides) -> OpenAIBackend:
    fields = {"backend": "openai", "base_url": server.base_url, "timeout_s": 5.0, "max_retries": 0, "cache": False}
    settings = LLMSettings(**{**fields, **overrides})
    return OpenAIBackend(settings, environ={})


def ask(llm: OpenAIBackend, **kwargs) -> Completion:
    return llm.complete(QUESTION, max_tokens=64, temperature=0.0, **kwargs)


def assert_one_line(exc: BackendError, *fragments: str) -> None:
    message = str(exc)
    assert "\n" not in message and len(message) < 400, message
    for fragment in fragments:
        assert fragment in message, message


# ---- happy paths ----------------------------------------------------------------------------


def test_completion_records_text_usage_latency_and_model():
    reply = "Scrooge signed it [1]."
    with LoopbackOpenAIServer(reply=lambda body: reply) as server:
        llm = backend(server, model="loopback-model")
        completion = ask(llm)
        sent = server.bodies[-1]
    assert completion.text == reply
    prompt_words = words(" ".join(m["content"] for m in QUESTION))
    # The server's own count (words) differs from tiktoken's, so this proves usage was used.
    assert completion.prompt_tokens == prompt_words != count_message_tokens(QUESTION)
    assert completion.completion_tokens == words(reply)
    assert completion.backend == "openai" and completion.model == "loopback-model"
    assert completion.latency_ms > 0 and completion.cached is False
    assert sent["messages"] == QUESTION and sent["max_tokens"] == 64 and sent["temperature"] == 0.0
    assert llm.last_completion == completion


def test_model_defaults_to_the_first_model_the_server_lists():
    with LoopbackOpenAIServer(model="served-model") as server:
        llm = backend(server)
        completion = ask(llm)
        assert server.counts["/v1/models"] == 1
        assert server.bodies[-1]["model"] == "served-model"
    assert completion.model == "served-model"


def test_tiktoken_counts_when_the_server_omits_usage():
    reply = "Scrooge signed the register of his burial."
    with LoopbackOpenAIServer(reply=lambda body: reply, include_usage=False) as server:
        completion = ask(backend(server, model="m"))
    assert completion.completion_tokens == count_tokens(reply)
    assert completion.prompt_tokens == count_message_tokens(QUESTION)
    assert completion.prompt_tokens > sum(count_tokens(m["content"]) for m in QUESTION)


def test_streaming_delivers_pieces_in_order_and_usage():
    reply = "Scrooge signed the register of his burial."
    pieces: list[str] = []
    with LoopbackOpenAIServer(reply=lambda body: reply) as server:
        completion = ask(backend(server, model="m"), on_text=pieces.append)
        sent = server.bodies[-1]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert len(pieces) == len(reply.split()) and "".join(pieces) == reply == completion.text
    assert completion.completion_tokens == words(reply) and completion.finish_reason == "stop"


def test_streaming_without_usage_falls_back_to_tiktoken():
    reply = "Bah! Humbug!"
    with LoopbackOpenAIServer(reply=lambda body: reply, include_usage=False) as server:
        completion = ask(backend(server, model="m"), on_text=lambda piece: None)
    assert completion.text == reply and completion.completion_tokens == count_tokens(reply)


def test_stop_sequences_are_sent():
    with LoopbackOpenAIServer() as server:
        ask(backend(server, model="m"), stop=["\n\n"])
        assert server.bodies[-1]["stop"] == ["\n\n"]


# ---- JSON mode ------------------------------------------------------------------------------


@pytest.mark.parametrize("reply", [
    '{"sufficient": true, "missing": []}',
    '```json\n{"sufficient": true, "missing": []}\n```',
    'Here is my verdict: {"sufficient": true, "missing": []} — done.',
])
def test_complete_json_parses_objects_fenced_or_wrapped(reply):
    with LoopbackOpenAIServer(reply=lambda body: reply) as server:
        verdict, completion = complete_json(backend(server, model="m"), QUESTION, max_tokens=50,
                                            required=("sufficient", "missing"))
        assert server.bodies[-1]["response_format"] == {"type": "json_object"}
    assert verdict == {"sufficient": True, "missing": []} and completion.text == reply


@pytest.mark.parametrize("reply, fragment", [
    ("The evidence is sufficient.", "no JSON object"),
    ('{"sufficient": true, "missing": [', "malformed JSON"),
    ('{"sufficient": true}', "lacks key(s) missing"),
])
def test_complete_json_fails_clearly_on_unusable_replies(reply, fragment):
    with LoopbackOpenAIServer(reply=lambda body: reply) as server:
        with pytest.raises(BackendError) as info:
            complete_json(backend(server, model="m"), QUESTION, max_tokens=50, required=("sufficient", "missing"))
    assert_one_line(info.value, fragment, "openai model m")


# ---- yes/no log-probabilities ---------------------------------------------------------------


def test_yes_no_logprob_normalises_yes_against_no():
    top = {"Yes": -0.2, " yes": -2.0, "No": -1.5, "Maybe": -3.0}
    with LoopbackOpenAIServer(top_logprobs=top) as server:
        llm = backend(server, model="m")
        p_yes = llm.yes_no_logprob(QUESTION)
        sent = server.bodies[-1]
    import math

    yes, no = math.exp(-0.2) + math.exp(-2.0), math.exp(-1.5)
    assert p_yes == pytest.approx(yes / (yes + no))
    assert sent["logprobs"] is True and sent["top_logprobs"] == 20 and sent["max_tokens"] == 1
    assert llm.last_completion is not None and llm.last_completion.completion_tokens == 1


@pytest.mark.parametrize("mode", ["reject_logprobs", "ignore_logprobs"])
def test_yes_no_logprob_is_none_when_the_server_cannot_give_logprobs(mode):
    with LoopbackOpenAIServer(mode=mode) as server:
        llm = backend(server, model="m")
        assert llm.yes_no_logprob(QUESTION) is None
        assert llm.yes_no_logprob(QUESTION) is None
        assert server.counts["/v1/chat/completions"] == 1  # learnt once, not asked again
        assert ask(llm).text.startswith("echo:")  # ordinary completions still work


def test_yes_no_logprob_reports_other_client_errors():
    with LoopbackOpenAIServer(mode="4xx", status=400) as server:
        llm = backend(server, model="m")
        with pytest.raises(BackendError) as info:
            llm.yes_no_logprob(QUESTION)
    assert_one_line(info.value, "HTTP 400", "log-probability request")
    assert llm._logprobs_supported  # a bad request is not proof that logprobs are unsupported


# ---- faults ---------------------------------------------------------------------------------


def test_retries_on_500_then_succeeds():
    with LoopbackOpenAIServer(fail_first=2, reply=lambda body: "recovered") as server:
        completion = ask(backend(server, model="m", max_retries=2))
        assert server.counts["/v1/chat/completions"] == 3
    assert completion.text == "recovered"


def test_persistent_500_is_one_line_after_bounded_attempts():
    with LoopbackOpenAIServer(mode="500") as server:
        started = time.perf_counter()
        with pytest.raises(BackendError) as info:
            ask(backend(server, model="m", max_retries=1))
        elapsed = time.perf_counter() - started
        assert server.counts["/v1/chat/completions"] == 2
    assert_one_line(info.value, "HTTP 500", "after 2 attempts", "loopback internal error", server.base_url)
    assert elapsed < 5


def test_slow_server_times_out_within_bounded_time():
    with LoopbackOpenAIServer(mode="timeout", delay_s=30) as server:
        started = time.perf_counter()
        with pytest.raises(BackendError) as info:
            ask(backend(server, model="m", timeout_s=0.4, max_retries=1))
        elapsed = time.perf_counter() - started
        assert server.counts["/v1/chat/completions"] == 2
    assert_one_line(info.value, "no answer", "0.4 s", "after 2 attempts")
    assert elapsed < 4


def test_server_down_is_one_line():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = LLMSettings(backend="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m",
                           timeout_s=2, max_retries=0, cache=False)
    started = time.perf_counter()
    with pytest.raises(BackendError) as info:
        OpenAIBackend(settings, environ={}).complete(QUESTION, max_tokens=8, temperature=0)
    assert_one_line(info.value, "cannot connect", f"127.0.0.1:{port}", "is the server running")
    assert time.perf_counter() - started < 3


@pytest.mark.parametrize("status", [400, 401, 404])
def test_4xx_is_one_line_and_not_retried(status):
    with LoopbackOpenAIServer(mode="4xx", status=status) as server:
        with pytest.raises(BackendError) as info:
            ask(backend(server, model="m", max_retries=2))
        assert server.counts["/v1/chat/completions"] == 1
    assert_one_line(info.value, f"HTTP {status}", f"loopback refuses with {status}")
    assert "attempts" not in str(info.value)


@pytest.mark.parametrize("mode, fragment", [("malformed", "malformed response"), ("html", "expected JSON")])
def test_malformed_or_non_json_body_is_one_line(mode, fragment):
    with LoopbackOpenAIServer(mode=mode) as server:
        with pytest.raises(BackendError) as info:
            ask(backend(server, model="m"))
    assert_one_line(info.value, fragment, "chat completion")


def test_api_key_falls_back_to_env_then_a_local_dummy():
    with LoopbackOpenAIServer() as server:
        settings = LLMSettings(backend="openai", base_url=server.base_url, model="m", cache=False)
        assert OpenAIBackend(settings, environ={"OPENAI_API_KEY": "sk-env"})._client.api_key == "sk-env"
        assert OpenAIBackend(settings, environ={})._client.api_key == "sk-local"
        explicit = settings.model_copy(update={"api_key": "sk-set"})
        assert OpenAIBackend(explicit, environ={"OPENAI_API_KEY": "sk-env"})._client.api_key == "sk-set"
