"""bf16 autocast embeddings stay interchangeable with fp32 ones (same model, real weights)."""
from __future__ import annotations

import numpy as np
import pytest

from pagerag.index.embed import cpu_has_bf16, get_embedder, resolve_precision

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
