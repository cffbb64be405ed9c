"""Window vectors pooled from a passage's word pieces (pagerag.index.pooling): the mean of the
states inside a span, special tokens and truncated text left out, with the real encoders."""
from __future__ import annotations

import numpy as np
import pytest

from pagerag.index.pooling import TokenStates, encode_with_spans, pool_spans
from pagerag.settings import load_settings

PASSAGE = ("Marley was dead: to begin with. There is no doubt whatever about that. The register of his "
           "burial was signed by the clergyman, the clerk, the undertaker, and the chief mourner. Scrooge "
           "signed it.")


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_a_span_is_the_unit_mean_of_the_word_pieces_inside_it():
    rng = np.random.default_rng(0)
    states = rng.normal(size=(6, 4)).astype(np.float32)
    # [CLS], four word pieces at 0-3, 4-7, 8-12, 13-20, [SEP]
    offsets = np.array([(0, 0), (0, 3), (4, 7), (8, 12), (13, 20), (0, 0)])
    tokens = TokenStates(states, offsets, read_to=20)
    pooled, alone = pool_spans(tokens, [(0, 7), (4, 20), (0, 20)])
    assert alone == []
    assert np.allclose(pooled[0], _unit(states[1:3].mean(0)), atol=1e-6)
    assert np.allclose(pooled[1], _unit(states[2:5].mean(0)), atol=1e-6)
    assert np.allclose(pooled[2], _unit(states[1:5].mean(0)), atol=1e-6)  # not [CLS]/[SEP]


def test_a_span_past_the_truncation_or_without_a_word_piece_is_left_to_be_embedded_alone():
    states = np.ones((4, 3), np.float32)
    tokens = TokenStates(states, np.array([(0, 0), (0, 5), (6, 9), (0, 0)]), read_to=9)
    pooled, alone = pool_spans(tokens, [(0, 9), (6, 30), (1, 4)])
    assert alone == [1, 2] and not pooled[1].any() and not pooled[2].any()


@pytest.fixture(scope="module", params=["openvino", "onnx", "torch"])
def encoder(request):
    from pagerag.index.encoder import get_encoder

    return get_encoder(load_settings(environ={}, overrides={"embed": {"backend": request.param}}).embed)


def test_text_vectors_from_the_pooling_pass_are_the_encoders_own(encoder):
    texts = [PASSAGE, "Who signed the register?", PASSAGE[:70]]
    vectors, _ = encode_with_spans(encoder, texts, [[(0, 31)], [(0, 8)], [(0, 10)]])
    assert np.min(np.sum(vectors * encoder.encode(texts), axis=1)) > 0.9999


def test_pooled_spans_match_sentence_transformers_token_states(encoder):
    """The offsets line up with the model's own word pieces: pooling sentence-transformers'
    token_embeddings over the same characters gives the same vector."""
    from sentence_transformers import SentenceTransformer

    from pagerag.index.embedding_model import resolve_model_path

    st = SentenceTransformer(str(resolve_model_path("packaged:all-MiniLM-L6-v2")), device="cpu")
    spans = [(0, 31), (32, 70), (71, len(PASSAGE))]
    _, pooled = encode_with_spans(encoder, [PASSAGE], [spans])
    states = st.encode([PASSAGE], output_value="token_embeddings")[0].numpy()
    offsets = st.tokenizer(PASSAGE, return_offsets_mapping=True)["offset_mapping"]
    for (s, e), vector in zip(spans, pooled):
        inside = [i for i, (a, b) in enumerate(offsets) if b > a and a >= s and b <= e]
        assert float(vector @ _unit(states[inside].mean(0))) > 0.9999
    # a pooled window is its passage's reading of it, not the window embedded alone
    alone = encoder.encode([PASSAGE[s:e] for s, e in spans])
    assert np.all(np.sum(alone * pooled, axis=1) < 0.999)


def test_a_window_past_the_truncation_is_embedded_alone(encoder):
    long = " ".join([PASSAGE] * 8)  # ~380 word pieces: truncated at 256
    tail = (len(long) - len(PASSAGE), len(long))
    head = (0, 31)
    _, pooled = encode_with_spans(encoder, [long], [[head, tail]])
    own = encoder.encode([long[tail[0]:tail[1]]])[0]
    assert float(pooled[1] @ own) > 0.9999
    assert float(pooled[0] @ encoder.encode([long[:31]])[0]) < 0.999  # the head is pooled


def test_releasing_the_encoders_memory_leaves_its_vectors_unchanged(encoder):
    """A build gives back the passage batches' arena before embedding names; the encoder must
    embed afterwards exactly as before."""
    texts = [PASSAGE] * 8 + ["Scrooge", "the clergyman"]
    before = encoder.encode(texts)
    encoder.release_memory()
    assert np.array_equal(encoder.encode(texts), before)


def test_releasing_the_encoders_memory_while_another_thread_embeds(encoder):
    """A server's build job releases the encoder's memory after its passage pass while a query
    thread may be embedding a question with the same encoder: neither may crash or change a
    vector (OpenVINO's in-place release under a running request crashed a process)."""
    import threading

    texts = [PASSAGE] * 8 + ["Scrooge", "the clergyman"]
    expected = encoder.encode(texts)
    results, errors, stop = [], [], threading.Event()

    def embed() -> None:
        while not stop.is_set():
            try:
                results.append(encoder.encode(texts))
            except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(repr(exc))
                return

    worker = threading.Thread(target=embed)
    worker.start()
    try:
        for _ in range(30):
            encoder.release_memory()
            assert np.array_equal(encoder.encode(texts), expected)
    finally:
        stop.set()
        worker.join()
    assert not errors and results and all(np.array_equal(r, expected) for r in results)
