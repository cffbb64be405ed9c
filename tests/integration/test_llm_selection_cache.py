"""Backend selection (`auto` and explicit) and the on-disk response cache, against the loopback
OpenAI-compatible server so a cache hit can be proven to send no request."""
from __future__ import annotations

import pytest

from helpers.openai_server import LoopbackOpenAIServer
from pagerag.errors import ConfigError
from pagerag.llm.openai_backend import OpenAIBackend
from pagerag.llm.cache import CachedLLM, ResponseCache
from pagerag.llm import describe_choice, get_llm, register_backend, registered_backends
from pagerag.settings import LLMSettings, load_settings

QUESTION = [{"role": "user", "content": "Who was Marley?"}]
CHAT = "/v1/chat/completions"


# ---- selection ------------------------------------------------------------------------------


def test_auto_with_nothing_configured_is_extractive():
    settings = LLMSettings()
    name, reason = describe_choice(settings, environ={})
    assert name == "extractive" and "no endpoint" in reason and "no GGUF" in reason
    assert get_llm(settings, environ={}) is None


def test_auto_prefers_an_endpoint_over_a_gguf(tmp_path):
    settings = LLMSettings(base_url="http://127.0.0.1:1/v1", gguf=str(tmp_path / "m.gguf"))
    name, reason = describe_choice(settings, environ={})
    assert name == "openai" and "llm.base_url = http://127.0.0.1:1/v1" in reason


def test_auto_reads_openai_base_url_from_the_environment():
    name, reason = describe_choice(LLMSettings(), environ={"OPENAI_BASE_URL": "http://localhost:8080/v1"})
    assert name == "openai" and "OPENAI_BASE_URL" in reason


def test_auto_picks_llamacpp_for_a_gguf_from_settings_or_env():
    assert describe_choice(LLMSettings(gguf="/models/a.gguf"), environ={})[0] == "llamacpp"
    name, reason = describe_choice(LLMSettings(), environ={"PAGERAG_LLM__GGUF": "/models/b.gguf"})
    assert name == "llamacpp" and "PAGERAG_LLM__GGUF = /models/b.gguf" in reason


def test_pagerag_env_reaches_the_choice_through_load_settings(tmp_path):
    settings = load_settings(environ={"PAGERAG_LLM__GGUF": "/models/c.gguf", "PAGERAG_CONFIG": str(tmp_path / "none.toml")})
    assert settings.llm.gguf == "/models/c.gguf"
    assert describe_choice(settings.llm, environ={})[0] == "llamacpp"


def test_explicit_backend_wins_over_auto_rules():
    settings = LLMSettings(backend="extractive", base_url="http://127.0.0.1:1/v1")
    assert describe_choice(settings, environ={}) == ("extractive", "llm.backend = extractive")
    assert get_llm(settings, environ={}) is None


def test_llamacpp_without_a_usable_gguf_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no GGUF model configured"):
        get_llm(LLMSettings(backend="llamacpp"), environ={})
    with pytest.raises(ConfigError, match="GGUF model not found"):
        get_llm(LLMSettings(gguf=str(tmp_path / "missing.gguf")), environ={})
    fake = tmp_path / "fake.gguf"
    fake.write_text("not a model")
    with pytest.raises(ConfigError, match="is not a GGUF model file"):
        get_llm(LLMSettings(gguf=str(fake)), environ={})


def test_get_llm_builds_openai_wrapped_in_the_cache(tmp_path):
    with LoopbackOpenAIServer() as server:
        llm = get_llm(LLMSettings(cache_dir=str(tmp_path)), environ={"OPENAI_BASE_URL": server.base_url})
        assert isinstance(llm, CachedLLM) and isinstance(llm.inner, OpenAIBackend)
        assert llm.inner.base_url == server.base_url and llm.cache.directory == tmp_path
        assert llm.complete(QUESTION, max_tokens=8, temperature=0).text.startswith("echo:")
        bare = get_llm(LLMSettings(cache=False), environ={"OPENAI_BASE_URL": server.base_url})
        assert isinstance(bare, OpenAIBackend)


def test_a_registered_backend_is_one_factory():
    built: list[LLMSettings] = []

    def factory(settings: LLMSettings):
        built.append(settings)
        return OpenAIBackend(settings, environ={})

    register_backend("custom-test", factory)
    assert "custom-test" in registered_backends()
    settings = LLMSettings.model_construct(**{**LLMSettings().model_dump(), "backend": "custom-test",
                                              "base_url": "http://127.0.0.1:1/v1", "cache": False})
    assert isinstance(get_llm(settings, environ={}), OpenAIBackend) and len(built) == 1


# ---- cache ----------------------------------------------------------------------------------


def cached_backend(server: LoopbackOpenAIServer, directory) -> CachedLLM:
    inner = OpenAIBackend(LLMSettings(base_url=server.base_url, model="m", cache=False), environ={})
    return CachedLLM(inner, ResponseCache(directory))


def test_cache_hit_pays_no_second_request(tmp_path):
    with LoopbackOpenAIServer(reply=lambda body: "Marley was Scrooge's partner.") as server:
        first = cached_backend(server, tmp_path).complete(QUESTION, max_tokens=16, temperature=0)
        # A new process would build a new backend: the disk, not memory, must answer.
        again = cached_backend(server, tmp_path).complete(QUESTION, max_tokens=16, temperature=0)
        assert server.counts[CHAT] == 1
        other = cached_backend(server, tmp_path).complete(QUESTION, max_tokens=17, temperature=0)
        assert server.counts[CHAT] == 2  # a different parameter is a different question
    assert first.cached is False and again.cached is True and other.cached is False
    assert again.text == first.text and again.prompt_tokens == first.prompt_tokens
    assert again.completion_tokens == first.completion_tokens and again.model == first.model


def test_cache_hit_streams_the_whole_text_once(tmp_path):
    with LoopbackOpenAIServer(reply=lambda body: "Bah! Humbug!") as server:
        llm = cached_backend(server, tmp_path)
        llm.complete(QUESTION, max_tokens=16, temperature=0)
        pieces: list[str] = []
        hit = llm.complete(QUESTION, max_tokens=16, temperature=0, on_text=pieces.append)
        assert server.counts[CHAT] == 1
    assert hit.cached and pieces == ["Bah! Humbug!"] and llm.last_completion == hit


def test_yes_no_answers_are_cached_with_their_cost(tmp_path):
    with LoopbackOpenAIServer(top_logprobs={"Yes": -0.3, "No": -1.4}) as server:
        llm = cached_backend(server, tmp_path)
        first = llm.yes_no_logprob(QUESTION)
        cost = llm.last_completion
        again = cached_backend(server, tmp_path).yes_no_logprob(QUESTION)
        assert server.counts[CHAT] == 1
    assert first == again and 0.5 < first < 1.0
    assert cost is not None and cost.completion_tokens == 1 and not cost.cached


def test_first_token_log_probabilities_are_cached_as_token_pairs(tmp_path):
    with LoopbackOpenAIServer(top_logprobs={"3": -0.2, "0": -1.9, "1": -4.0}) as server:
        first = cached_backend(server, tmp_path).first_token_logprobs(QUESTION)
        again_llm = cached_backend(server, tmp_path)
        again = again_llm.first_token_logprobs(QUESTION)
        assert server.counts[CHAT] == 1
    assert first == again == [("3", -0.2), ("0", -1.9), ("1", -4.0)]
    assert again_llm.last_completion.cached and again_llm.last_completion.completion_tokens == 1


def test_a_torn_cache_entry_is_a_miss_and_is_rewritten(tmp_path):
    with LoopbackOpenAIServer() as server:
        llm = cached_backend(server, tmp_path)
        llm.complete(QUESTION, max_tokens=16, temperature=0)
        (entry,) = tmp_path.glob("*/*.json")
        entry.write_text('{"text": "half')  # as if a writer died mid-file (atomic writes prevent it)
        fresh = llm.complete(QUESTION, max_tokens=16, temperature=0)
        assert server.counts[CHAT] == 2 and not fresh.cached
        assert llm.complete(QUESTION, max_tokens=16, temperature=0).cached
    assert not list(tmp_path.glob("*/.tmp-*")), "no temporary files left behind"
    assert len(ResponseCache(tmp_path)) == 1
