"""bf16 embeddings (torch autocast, OpenVINO) stay interchangeable with fp32 ones (same model, real weights)."""
from __future__ import annotations

import numpy as np
import pytest

from pagerag.index.encoder import cpu_has_bf16, resolve_precision
from pagerag.index.torch_encoder import get_embedder

TEXTS = [
    "Marley was dead: to begin with. There is no doubt whatever about that.",
    "Scrooge signed it: and Scrooge's name was good upon 'Change, for anything he chose to put his hand to.",
    "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse.",
    "The whale, the white whale, Moby Dick, was sighted off the starboard bow at dawn.",
]


def test_auto_precision_follows_the_cpu():
    assert resolve_precision("auto") == ("bf16" if cpu_has_bf16() else "fp32")
    assert resolve_precision("fp32") == "fp32"


def test_bf16_vectors_match_fp32():
    if not cpu_has_bf16():
        pytest.skip("this CPU has no native bf16 (AMX / AVX512-BF16); bf16 is not used here")
    fp32 = get_embedder(precision="fp32").encode(TEXTS)
    bf16 = get_embedder(precision="bf16").encode(TEXTS)
    assert bf16.dtype == np.float32
    assert np.allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-3)
    assert np.min(np.sum(fp32 * bf16, axis=1)) > 0.999
    # the neighbour structure is the same: each text is closest to itself and the two books separate
    sims = bf16 @ fp32.T
    assert list(np.argmax(sims, axis=1)) == [0, 1, 2, 3]


@pytest.fixture(scope="module")
def openvino_and_onnx():
    from pagerag.index.encoder import get_encoder
    from pagerag.settings import load_settings

    def encoder(backend):
        return get_encoder(load_settings(environ={}, overrides={"embed": {"backend": backend}}).embed)

    return encoder("openvino"), encoder("onnx")


def test_openvino_vectors_match_onnx_fp32(openvino_and_onnx):
    openvino, onnx = openvino_and_onnx
    assert openvino.precision == ("bf16" if cpu_has_bf16() else "fp32")
    a, b = openvino.encode(TEXTS), onnx.encode(TEXTS)
    assert a.dtype == np.float32 and np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-3)
    assert np.min(np.sum(a * b, axis=1)) > 0.9999
    assert list(np.argmax(a @ b.T, axis=1)) == [0, 1, 2, 3]


def test_openvino_vectors_do_not_depend_on_the_run_or_the_batch(openvino_and_onnx):
    """What a build relies on: the same text in the same-width batch gives the same vector, and
    its batch-mates do not change it (a document's vectors do not depend on its neighbours)."""
    openvino, _ = openvino_and_onnx
    first = openvino.encode(TEXTS)
    assert np.array_equal(openvino.encode(TEXTS), first)
    same_width = openvino.encode([TEXTS[2], TEXTS[2]])
    assert np.array_equal(same_width[0], same_width[1])
    assert np.array_equal(openvino.encode([TEXTS[2]])[0], same_width[0])
