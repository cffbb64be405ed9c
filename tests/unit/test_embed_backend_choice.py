"""embed.backend x embed.precision: what runs, what is refused with one clear line; and the ONNX
encoder's padding-aware batches."""
from __future__ import annotations

import numpy as np
import pytest

from pagerag.errors import ConfigError
from pagerag.index.encoder import choose, resolve_precision
from pagerag.index.exported import TOKENS_PER_BATCH, _batches

MODEL = "packaged:all-MiniLM-L6-v2"


def test_auto_is_openvino_in_bf16_where_the_cpu_has_it():
    from pagerag.index.encoder import cpu_has_bf16

    native = cpu_has_bf16()
    assert choose(MODEL, "auto", "auto") == choose(MODEL, "openvino", "auto")
    assert choose(MODEL, "auto", "auto").backend == "openvino"
    assert choose(MODEL, "auto", "auto").precision == ("bf16" if native else "fp32")
    assert choose(MODEL, "auto", "fp32") == choose(MODEL, "openvino", "fp32")
    assert choose(MODEL, "auto", "bf16").backend == ("openvino" if native else "torch")
    assert choose(MODEL, "auto", "int8") == choose(MODEL, "onnx", "int8")  # int8 is ONNX Runtime's alone


def test_torch_resolves_auto_by_cpu():
    assert choose(MODEL, "torch", "auto").precision == resolve_precision("auto")
    assert choose(MODEL, "torch", "fp32").precision == "fp32"


@pytest.mark.parametrize("backend, precision, says", [
    ("torch", "int8", "needs embed.backend = onnx"),
    ("openvino", "int8", "needs embed.backend = onnx"),
    ("onnx", "bf16", "needs embed.backend = openvino or torch"),
    ("jax", "auto", "unknown embed.backend"),
])
def test_impossible_combinations_are_one_line_config_errors(backend, precision, says):
    with pytest.raises(ConfigError, match=says) as err:
        choose(MODEL, backend, precision)
    assert "\n" not in str(err.value)


def test_open_encoder_opens_the_backend_and_precision_choose_decided():
    """The factory decides once: the backend it opens runs the choice's precision, and a backend
    given 'auto' (which only the factory resolves) refuses it."""
    from pagerag.index.encoder import get_encoder, open_encoder
    from pagerag.index.torch_encoder import Embedder
    from pagerag.settings import load_settings

    embed = load_settings(environ={}, overrides={"embed": {"backend": "onnx"}}).embed
    choice = choose(embed.model, embed.backend, embed.precision)
    encoder = open_encoder(embed)
    assert (encoder.backend, encoder.precision) == (choice.backend, choice.precision) == ("onnx", "fp32")
    assert get_encoder(embed) is get_encoder(embed) is not encoder  # opened once per process
    with pytest.raises(ValueError, match="resolves 'auto'"):
        Embedder(precision="auto")


def test_batches_keep_padded_tokens_within_the_budget():
    lengths = [256] * 20 + [40] * 100 + [6] * 1000
    order = np.argsort([-n for n in lengths], kind="stable")
    batches = list(_batches(order, lengths, 0))
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))  # every text once
    for batch in batches:
        assert len(batch) * max(lengths[i] for i in batch) <= TOKENS_PER_BATCH
    assert len(batches[0]) == TOKENS_PER_BATCH // 256  # full passages: 8 a batch
    assert [len(b) for b in _batches(order, lengths, 500)] == [500, 500, 120]


def test_a_question_is_not_padded_with_its_short_mentions():
    lengths = [22, 5, 7, 4, 6]  # a question, then name mentions and bridge queries
    order = np.argsort([-n for n in lengths], kind="stable")
    batches = [sorted(b.tolist()) for b in _batches(order, lengths, 0)]
    assert batches == [[0], [1, 2, 3, 4]]
    similar = [20, 19, 18, 20]  # similar lengths stay in one pass
    assert len(list(_batches(np.argsort([-n for n in similar], kind="stable"), similar, 0))) == 1


def test_openvino_is_imported_without_its_telemetry():
    """openvino's import sends a usage event to Google Analytics unless its telemetry package is
    missing; pagerag's import of it makes that package missing (a fresh process, as a user's)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from pagerag.index.encoder import get_encoder\n"
            "from pagerag.settings import load_settings\n"
            "print(get_encoder(load_settings(environ={}).embed).backend)\n"
            "from openvino.tools.ovc import telemetry_utils\n"
            "print(sys.modules['openvino_telemetry'] is None, telemetry_utils.tm.__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["openvino", "True", "openvino.tools.ovc.telemetry_stub"]
