"""The `llamacpp` backend with a real tiny GGUF (SmolLM2-135M-Instruct, 93 MB) run in-process.

The model is found through env PAGERAG_TEST_GGUF, else `<repo>/../shared/tools/local-llm tiny`
(which prints its path); the tests skip with the reason when neither gives a GGUF. Replies are
kept to a few tokens: these tests check the plumbing, not the (weak) model's judgement.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from pagerag.errors import BackendError
from pagerag.llm import llamacpp_backend as backend_llamacpp
from pagerag.llm.llamacpp_backend import LlamaCppBackend, load_count, shared_server
from pagerag.llm import get_llm
from pagerag.settings import LLMSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCAL_LLM = REPO_ROOT.parent / "shared" / "tools" / "local-llm"
YES_QUESTION = [{"role": "user", "content": "Is Paris the capital of France? Answer yes or no."}]


def _find_tiny_gguf() -> tuple[Path | None, str]:
    configured = os.environ.get("PAGERAG_TEST_GGUF")
    if configured:
        path = Path(configured)
        return (path, "") if path.is_file() else (None, f"PAGERAG_TEST_GGUF={configured} is not a file")
    if not LOCAL_LLM.is_file():
        return None, f"no tiny GGUF: set PAGERAG_TEST_GGUF or provide {LOCAL_LLM}"
    try:
        run = subprocess.run([str(LOCAL_LLM), "tiny"], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"`{LOCAL_LLM} tiny` failed: {exc}"
    lines = run.stdout.strip().splitlines()
    path = Path(lines[-1]) if run.returncode == 0 and lines else None
    if path is None or not path.is_file():
        return None, f"`{LOCAL_LLM} tiny` gave no GGUF (exit {run.returncode}): {run.stderr.strip()[-200:]}"
    return path, ""


@pytest.fixture(scope="module")
def tiny_gguf() -> Path:
    path, reason = _find_tiny_gguf()
    if path is None:
        pytest.skip(reason)
    return path


@pytest.fixture(scope="module")
def settings(tiny_gguf: Path) -> LLMSettings:
    # One thread: on a shared 2-core machine, llama.cpp's spinning thread pool slows down badly
    # when another process holds a core. A small context keeps the KV cache (and load) small.
    return LLMSettings(backend="llamacpp", gguf=str(tiny_gguf), threads=1, n_ctx=1024, cache=False)


@pytest.fixture(scope="module")
def llm(settings: LLMSettings) -> LlamaCppBackend:
    return LlamaCppBackend(settings)


def test_completion_returns_text_and_token_counts(llm):
    completion = llm.complete([{"role": "user", "content": "What is the capital of France?"}],
                              max_tokens=8, temperature=0.0)
    assert completion.text.strip()
    assert completion.prompt_tokens > 5 and 1 <= completion.completion_tokens <= 8
    assert completion.backend == "llamacpp" and completion.model == Path(llm.path).name
    assert completion.latency_ms > 0 and completion.finish_reason in ("stop", "length")
    assert llm.last_completion == completion


def test_yes_no_logprob_is_a_probability(llm):
    p_yes = llm.yes_no_logprob(YES_QUESTION)
    assert p_yes is not None and 0.0 <= p_yes <= 1.0
    assert llm.last_completion is not None and llm.last_completion.completion_tokens == 1


def test_same_request_same_reply_at_temperature_zero(llm):
    messages = [{"role": "user", "content": "Name a colour."}]
    first = llm.complete(messages, max_tokens=6, temperature=0.0)
    assert llm.complete(messages, max_tokens=6, temperature=0.0).text == first.text


def test_streaming_pieces_make_the_text(llm):
    pieces: list[str] = []
    completion = llm.complete([{"role": "user", "content": "Say hello."}], max_tokens=6, temperature=0.0,
                              on_text=pieces.append)
    assert len(pieces) >= 2 and "".join(pieces) == completion.text
    assert completion.completion_tokens == 6 or completion.finish_reason == "stop"


def test_json_mode_constrains_the_reply_to_an_object(llm):
    completion = llm.complete([{"role": "user", "content": "Give a JSON object with key colour."}],
                              max_tokens=6, temperature=0.0, json_mode=True)
    assert completion.text.lstrip().startswith("{")


def test_stop_sequence_ends_the_reply(llm):
    messages = [{"role": "user", "content": "Count from one to ten."}]
    free = llm.complete(messages, max_tokens=12, temperature=0.0).text
    # A stop string taken from the middle of the free reply: greedy decoding repeats the reply
    # up to it, so the stopped reply must be exactly the part before it.
    start = next(i for i in range(3, len(free)) if not free[i].isspace())
    marker = free[start:start + 2]
    stopped = llm.complete(messages, max_tokens=12, temperature=0.0, stop=[marker]).text
    assert stopped.rstrip() == free[: free.index(marker)].rstrip(), (free, marker, stopped)


def test_chatml_fallback_prompt_works(settings):
    chatml = LlamaCppBackend(settings.model_copy(update={"chat_template": "chatml"}))
    completion = chatml.complete([{"role": "user", "content": "What is the capital of France?"}],
                                 max_tokens=6, temperature=0.0)
    assert completion.text.strip() and "<|im_" not in completion.text
    p_yes = chatml.yes_no_logprob(YES_QUESTION)
    assert p_yes is not None and 0.0 <= p_yes <= 1.0


def test_prompt_longer_than_the_context_is_one_line_error(llm):
    long_prompt = [{"role": "user", "content": "word " * 1500}]
    with pytest.raises(BackendError) as info:
        llm.complete(long_prompt, max_tokens=4, temperature=0.0)
    message = str(info.value)
    assert "\n" not in message and "exceeds the available context size" in message and "llm.n_ctx" in message


def test_model_is_loaded_once_per_process(llm, settings):
    llm.complete(YES_QUESTION, max_tokens=1, temperature=0.0)
    loads = load_count()
    assert loads >= 1 and str(Path(llm.path)) in backend_llamacpp._SERVERS
    via_registry = get_llm(settings, environ={})
    assert isinstance(via_registry, LlamaCppBackend)
    via_registry.complete(YES_QUESTION, max_tokens=1, temperature=0.0)
    LlamaCppBackend(settings.model_copy(update={"chat_template": "chatml"})).yes_no_logprob(YES_QUESTION)
    assert load_count() == loads
    assert shared_server(llm.path, 1, 1024) is shared_server(via_registry.path, 2, 4096)
