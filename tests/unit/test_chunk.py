"""Sentences and passages: honest offsets on real books, the embedder's word-piece cap, overlap."""
from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

import pytest

from pagerag.index.embedding_model import get_wordpiece_counter
from pagerag.offline import get_encoding
from pagerag.records import Passage, SourceDoc
from pagerag.settings import ChunkSettings
from pagerag.text.chunk import chunk_document, chunk_documents
from pagerag.text.load import load_sources
from pagerag.text.sentences import split_sentences


@pytest.fixture(scope="session")
def count_wordpieces():
    return get_wordpiece_counter()


@pytest.fixture(scope="session")
def carol(data_dir: Path) -> SourceDoc:
    [doc] = load_sources([data_dir / "books" / "christmas_carol.txt"])
    return doc


@pytest.fixture(scope="session")
def moby(data_dir: Path) -> SourceDoc:
    [doc] = load_sources([data_dir / "books" / "melville-moby_dick.txt"])
    return doc


@pytest.fixture(scope="session")
def moby_passages(moby: SourceDoc, count_wordpieces) -> tuple[list[Passage], float]:
    started = time.perf_counter()
    passages = chunk_document(moby, ChunkSettings(), count_wordpieces)
    return passages, time.perf_counter() - started


def doc_of(text: str, doc_id: str = "t") -> SourceDoc:
    start = len(text) - len(text.lstrip())
    return SourceDoc(doc_id, f"/tmp/{doc_id}.txt", text, "0" * 64, "utf-8", start, len(text.rstrip()))


def assert_passages_are_honest(doc: SourceDoc, passages: list[Passage], settings: ChunkSettings) -> None:
    """The invariants every passage of every document must keep."""
    assert passages, "a non-empty body gives passages"
    covered = bytearray(len(doc.text))
    encoding = get_encoding(settings.encoding)
    for ordinal, p in enumerate(passages):
        assert doc.text[p.start : p.end] == p.text
        assert doc.content_start <= p.start < p.end <= doc.content_end  # never the licence
        assert p.text == p.text.strip()
        assert (p.passage_id, p.ordinal, p.doc_id, p.file) == (f"{doc.doc_id}:{ordinal:05d}", ordinal, doc.doc_id, doc.path)
        assert p.n_tokens == len(encoding.encode_ordinary(p.text))
        covered[p.start : p.end] = b"\x01" * (p.end - p.start)
    assert all(a.start < b.start and a.end < b.end for a, b in zip(passages, passages[1:]))  # text advances
    uncovered = [i for i in range(doc.content_start, doc.content_end) if not covered[i] and not doc.text[i].isspace()]
    assert not uncovered, f"characters outside every passage, e.g. {doc.text[uncovered[0]:uncovered[0] + 40]!r}"


# ---------------------------------------------------------------------------------------------
# Sentences


def sentences(text: str) -> list[str]:
    return [text[s:e] for s, e in split_sentences(text, 0, len(text))]


def test_abbreviations_and_initials_do_not_end_sentences() -> None:
    text = "Mr. Jones met Mrs. Smith and Dr. Watson at St. Paul's. H. G. Wells came too, e.g. on Monday. Then they left."
    assert sentences(text) == [
        "Mr. Jones met Mrs. Smith and Dr. Watson at St. Paul's.",
        "H. G. Wells came too, e.g. on Monday.",
        "Then they left.",
    ]


def test_quotes_stay_with_their_sentence() -> None:
    text = "\u201cStop!\u201d he cried. \u201cNow?\u201d \u2018Yes,\u2019 said she. \"Go.\" 'Fine.' It ended. \"No!\" said he."
    assert sentences(text) == [
        "\u201cStop!\u201d he cried.", "\u201cNow?\u201d", "\u2018Yes,\u2019 said she.", '"Go."', "'Fine.'",
        "It ended.", '"No!" said he.',
    ]


def test_paragraph_breaks_end_sentences_and_lines_do_not() -> None:
    text = "CHAPTER I\n\nIt was a dark\nand stormy night. Rain fell\n   \n  A heading without a stop"
    assert sentences(text) == ["CHAPTER I", "It was a dark\nand stormy night.", "Rain fell", "A heading without a stop"]


def test_spans_are_absolute_and_trimmed() -> None:
    text = "IGNORED PREFIX.  One two.  Three four!  \n\n  Five.   IGNORED"
    start, end = text.index("One") - 2, text.index("IGNORED", 10)
    spans = split_sentences(text, start, end)
    assert [text[s:e] for s, e in spans] == ["One two.", "Three four!", "Five."]
    assert all(start <= s < e <= end for s, e in spans)


def test_sentence_split_of_a_whole_book(moby: SourceDoc) -> None:
    # (its speed is part of the build benchmark, not a timed unit test)
    spans = split_sentences(moby.text, moby.content_start, moby.content_end)
    assert 5_000 < len(spans) < 20_000
    assert all(not moby.text[s].isspace() and not moby.text[e - 1].isspace() for s, e in spans)


# ---------------------------------------------------------------------------------------------
# Passages on real books


def test_every_passage_of_a_christmas_carol_is_honest(carol: SourceDoc, count_wordpieces) -> None:
    settings = ChunkSettings()
    passages = chunk_document(carol, settings, count_wordpieces)
    assert_passages_are_honest(carol, passages, settings)
    assert max(count_wordpieces([p.text for p in passages])) <= settings.max_wordpieces
    assert not any("Gutenberg" in p.text for p in passages)


def test_every_passage_of_moby_dick_is_honest(moby: SourceDoc, moby_passages, count_wordpieces) -> None:
    passages, _ = moby_passages
    settings = ChunkSettings()
    assert_passages_are_honest(moby, passages, settings)
    assert max(count_wordpieces([p.text for p in passages])) <= settings.max_wordpieces
    tokens = [p.n_tokens for p in passages]
    assert 150 <= statistics.median(tokens) <= 200 and max(tokens) <= 230


def test_flattened_single_line_novel_is_honest(data_dir: Path, count_wordpieces) -> None:
    [doc] = load_sources([data_dir / "graphrag-bench-novel" / "texts" / "Novel-5956.txt"])
    settings = ChunkSettings()
    assert_passages_are_honest(doc, chunk_document(doc, settings, count_wordpieces), settings)


def test_wordpiece_cap_holds_for_long_windows(carol: SourceDoc, count_wordpieces) -> None:
    settings = ChunkSettings(tokens=1000)
    passages = chunk_document(carol, settings, count_wordpieces)
    assert_passages_are_honest(carol, passages, settings)
    pieces = count_wordpieces([p.text for p in passages])
    assert max(pieces) <= settings.max_wordpieces
    assert statistics.median(pieces) > 200  # windows grow up to the cap, not far below it
    # without the counter the same settings make windows the embedder would truncate
    uncapped = chunk_document(carol, settings)
    assert max(count_wordpieces([p.text for p in uncapped])) > 2 * settings.max_wordpieces


def test_wordpiece_cap_holds_on_text_the_two_tokenizers_see_differently(count_wordpieces) -> None:
    # "#" * 600 is ~5 tiktoken tokens but 600 word pieces; "a.b.c" runs cost ~2 pieces a token.
    text = "Intro sentence here. " + "#" * 600 + " and on. " + "a.b.c.d.e.f.g " * 60 + "\n\nThe end."
    doc = doc_of(text)
    settings = ChunkSettings(tokens=200)
    passages = chunk_document(doc, settings, count_wordpieces)
    assert_passages_are_honest(doc, passages, settings)
    assert max(count_wordpieces([p.text for p in passages])) <= settings.max_wordpieces


def test_a_sentence_longer_than_a_window_is_split_at_token_boundaries() -> None:
    words = " ".join(f"word{i}" for i in range(600))  # one ~1,200-token sentence, no line breaks
    doc = doc_of(f"Short start. {words}. Short end.")
    settings = ChunkSettings(tokens=100, overlap=0.0)
    passages = chunk_document(doc, settings)
    assert_passages_are_honest(doc, passages, settings)
    assert max(p.n_tokens for p in passages) <= 110
    inner = [p.text for p in passages if "word300" in p.text]
    assert inner and all(re.fullmatch(r"[\w ]+", t) for t in inner)


def test_overlap_is_roughly_the_setting(moby_passages) -> None:
    passages, _ = moby_passages
    shares = []
    for a, b in zip(passages, passages[1:]):
        shared = max(0, a.end - b.start)
        shares.append(shared / (a.end - a.start))
    assert 0.08 <= statistics.mean(shares) <= 0.22, statistics.mean(shares)


def test_no_overlap_when_set_to_zero(carol: SourceDoc) -> None:
    passages = chunk_document(carol, ChunkSettings(overlap=0.0))
    assert all(b.start >= a.end for a, b in zip(passages, passages[1:]))


def test_chunking_is_deterministic(carol: SourceDoc, count_wordpieces) -> None:
    first = chunk_document(carol, ChunkSettings(), count_wordpieces)
    second = chunk_document(carol, ChunkSettings(), count_wordpieces)
    assert first == second


def test_several_documents_and_progress(tmp_path: Path, count_wordpieces) -> None:
    (tmp_path / "a.txt").write_text("Alpha one. Alpha two.\n\nAlpha three.")
    (tmp_path / "b.md").write_text("# Beta\n\nBeta body sentence.")
    docs = load_sources([tmp_path])
    done: list[int] = []
    passages = chunk_documents(docs, ChunkSettings(), count_wordpieces, progress=done.append)
    assert [p.passage_id for p in passages] == ["a:00000", "b:00000"]
    assert [p.text for p in passages] == ["Alpha one. Alpha two.\n\nAlpha three.", "# Beta\n\nBeta body sentence."]
    assert sum(done) == sum(len(d.body) for d in docs) and len(done) == 2


def test_unset_body_end_means_the_whole_text() -> None:
    doc = SourceDoc("raw", "/tmp/raw.txt", "One sentence. Two sentences!", "0" * 64, "utf-8")  # content_end=-1
    [passage] = chunk_document(doc, ChunkSettings())
    assert passage.text == doc.text
