"""Loading sources: bad inputs give one clear line, encodings decode, Gutenberg wrappers are cut."""
from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

import pytest

from pagerag.errors import InputError, PageRAGError
from pagerag.settings import ChunkSettings
from pagerag.text.gutenberg import find_body
from pagerag.text.load import load_sources

PROSE = "It was a bright cold day in April. The clocks were striking thirteen.\n"


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def input_error(paths, settings: ChunkSettings | None = None) -> str:
    """The message of the InputError that loading `paths` raises; it must be one line."""
    with pytest.raises(InputError) as caught:
        load_sources(paths, settings)
    message = str(caught.value)
    assert "\n" not in message and message.strip() == message
    assert isinstance(caught.value, PageRAGError)
    return message


# ---------------------------------------------------------------------------------------------
# Bad inputs


def test_missing_path_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    message = input_error([missing])
    assert str(missing) in message and "no such file" in message


def test_folder_without_text_files(tmp_path: Path) -> None:
    write(tmp_path / "books" / "cover.png", b"\x89PNG")
    write(tmp_path / "books" / ".hidden.txt", PROSE)  # hidden files are not inputs
    message = input_error([tmp_path / "books"])
    assert "books" in message and "no supported files (.txt, .md, .pdf, .epub, .html, .docx)" in message


def test_unsupported_extension(tmp_path: Path) -> None:
    path = write(tmp_path / "book.rtf", PROSE)
    message = input_error([path])
    assert "book.rtf" in message and "unsupported file type '.rtf'" in message and "save it as .docx first" in message


def test_empty_file(tmp_path: Path) -> None:
    path = write(tmp_path / "empty.txt", b"")
    assert "empty.txt: file is empty" in input_error([path])


def test_whitespace_only_file(tmp_path: Path) -> None:
    path = write(tmp_path / "blank.md", " \n\t\r\n  \n")
    assert "blank.md: file contains only whitespace" in input_error([path])


def test_binary_file_with_nul_bytes(tmp_path: Path) -> None:
    path = write(tmp_path / "image.txt", b"GIF89a\x00\x01\x02" + bytes(range(256)) * 4)
    assert "image.txt: looks like a binary file (contains NUL bytes)" in input_error([path])


def test_binary_file_of_control_characters(tmp_path: Path) -> None:
    path = write(tmp_path / "dump.txt", (b"ab\x01\x02\x03\x1b\x07cd" * 200))
    assert "dump.txt: looks like a binary file (many control characters)" in input_error([path])


def test_bytes_that_are_no_text_encoding(tmp_path: Path) -> None:
    # Not UTF-8, not cp1252 (0x81, 0x8d, ... are undefined there), and as latin-1 a quarter of the
    # characters would be C1 control codes: not text in any encoding we accept.
    path = write(tmp_path / "noise.txt", bytes(range(0x80, 0x100)) * 40)
    assert "noise.txt: not decodable as text" in input_error([path])


def test_file_over_the_size_limit(tmp_path: Path) -> None:
    path = write(tmp_path / "big.txt", PROSE * 40)  # ~2.8 kB
    message = input_error([path], ChunkSettings(max_file_mb=0.001))
    assert "big.txt: file is too large" in message and "chunk.max_file_mb" in message


def test_huge_file_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    with open(path, "wb") as handle:  # a sparse 200 MB file: costs no disk, but reading it would
        handle.truncate(200 * 1024 * 1024)
    started = time.perf_counter()
    message = input_error([path])
    assert time.perf_counter() - started < 1.0
    assert "huge.txt: file is too large (200.0 MB > limit 100 MB" in message


def test_line_longer_than_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path / "wide.txt", PROSE * 3 + "x" * 1500 + "\n" + PROSE)
    message = input_error([path], ChunkSettings(max_line_chars=1000))
    assert "wide.txt: line 4 is longer than 1,000 characters" in message


def test_single_line_file_over_a_million_characters(tmp_path: Path) -> None:
    path = write(tmp_path / "oneline.txt", "word " * 220_000)  # 1.1 M characters, no newline
    assert "oneline.txt: line 1 is longer than 1,000,000 characters" in input_error([path])


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_unreadable_file(tmp_path: Path) -> None:
    path = write(tmp_path / "secret.txt", PROSE)
    path.chmod(0)
    try:
        assert "secret.txt: cannot read file (permission denied)" in input_error([path])
    finally:
        path.chmod(0o644)


def test_licence_only_file_has_no_body(tmp_path: Path) -> None:
    text = "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\nlicence"
    path = write(tmp_path / "licence.txt", text)
    assert "licence.txt: no text left after removing the Project Gutenberg header" in input_error([path])


def test_no_paths_at_all() -> None:
    assert "no input files" in input_error([])


# ---------------------------------------------------------------------------------------------
# Encodings and newlines


def test_utf8_bom_is_stripped_and_hash_is_of_raw_bytes(tmp_path: Path) -> None:
    raw = b"\xef\xbb\xbf" + "Caf\u00e9 \u201cnoir\u201d.\n".encode("utf-8")
    [doc] = load_sources([write(tmp_path / "bom.txt", raw)])
    assert doc.text == "Caf\u00e9 \u201cnoir\u201d.\n"
    assert doc.encoding == "utf-8-sig"
    assert doc.sha256 == hashlib.sha256(raw).hexdigest()


def test_plain_utf8_is_named_utf8(tmp_path: Path) -> None:
    [doc] = load_sources([write(tmp_path / "plain.txt", "na\u00efve r\u00e9sum\u00e9")])
    assert (doc.encoding, doc.text) == ("utf-8", "na\u00efve r\u00e9sum\u00e9")


def test_cp1252_curly_quotes(tmp_path: Path) -> None:
    raw = b"\x93Hello,\x94 she said \x96 it\x92s late\x85 and the price was \x80 5."
    [doc] = load_sources([write(tmp_path / "windows.txt", raw)])
    assert doc.encoding == "cp1252"
    assert doc.text == "\u201cHello,\u201d she said \u2013 it\u2019s late\u2026 and the price was \u20ac 5."


def test_latin1_fallback_keeps_every_character(tmp_path: Path) -> None:
    # 0x81 is undefined in cp1252, so only latin-1 decodes this; the stray control character is
    # kept (offsets must stay honest) because it is rare.
    raw = ("Le caf\u00e9 \u00e9tait na\u00eff. " * 20).encode("latin-1") + b"\x81 fin."
    [doc] = load_sources([write(tmp_path / "latin.txt", raw)])
    assert doc.encoding == "latin-1"
    assert doc.text.startswith("Le caf\u00e9 \u00e9tait na\u00eff.") and doc.text.endswith("\x81 fin.")
    assert len(doc.text) == len(raw)


def test_utf16_with_bom(tmp_path: Path) -> None:
    [doc] = load_sources([write(tmp_path / "wide.txt", "\ufeffHello \u00e9l\u00e8ve.\r\n".encode("utf-16-le"))])
    assert doc.encoding == "utf-16" and doc.text == "Hello \u00e9l\u00e8ve.\n"


def test_crlf_and_lone_cr_become_newlines(tmp_path: Path) -> None:
    [doc] = load_sources([write(tmp_path / "dos.txt", b"one\r\ntwo\rthree\n\r\nfour\r")])
    assert doc.text == "one\ntwo\nthree\n\nfour\n"
    assert (doc.content_start, doc.content_end) == (0, len("one\ntwo\nthree\n\nfour"))
    assert doc.body == "one\ntwo\nthree\n\nfour"


# ---------------------------------------------------------------------------------------------
# Several files, folders and ids


def test_folder_is_recursive_sorted_and_skips_other_files(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    write(root / "b.txt", PROSE)
    write(root / "a" / "z.md", "# Title\n\n" + PROSE)
    write(root / "a" / "cover.png", b"\x89PNG")
    write(root / "a" / "old.doc", b"\xd0\xcf\x11\xe0")
    write(root / ".git" / "x.txt", PROSE)
    write(root / "C.TXT", PROSE)
    notes: list[str] = []
    docs = load_sources([root], notes=notes)
    assert [Path(d.path).relative_to(root.resolve()).as_posix() for d in docs] == ["C.TXT", "a/z.md", "b.txt"]
    assert [d.doc_id for d in docs] == ["c", "z", "b"]
    assert notes == ["skipped 2 unsupported files (not .txt, .md, .pdf, .epub, .html, .docx): cover.png, old.doc"]
    assert [d.doc_id for d in load_sources([root])] == [d.doc_id for d in docs]  # deterministic


def test_doc_ids_are_safe_and_unique(tmp_path: Path) -> None:
    first = write(tmp_path / "x" / "Book One!.txt", PROSE)
    second = write(tmp_path / "y" / "book-one.md", PROSE)
    third = write(tmp_path / "\u00c9mile: vol 2.txt", PROSE)
    docs = load_sources([first, second, third])
    assert [d.doc_id for d in docs] == ["book-one", "book-one-2", "emile-vol-2"]
    assert all(re.fullmatch(r"[a-z0-9._-]+", d.doc_id) for d in docs)


def test_the_same_file_twice_is_loaded_once(tmp_path: Path) -> None:
    path = write(tmp_path / "dir" / "one.txt", PROSE)
    assert len(load_sources([path, tmp_path / "dir", str(path)])) == 1


def test_a_single_path_string_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path / "solo.txt", PROSE)
    [doc] = load_sources(str(path))
    assert doc.path == str(path.resolve()) and doc.body == PROSE.strip()


# ---------------------------------------------------------------------------------------------
# Project Gutenberg wrappers


def test_real_gutenberg_file_is_cut_to_the_book(data_dir: Path) -> None:
    path = data_dir / "books" / "christmas_carol.txt"
    [doc] = load_sources([path])
    assert doc.encoding == "utf-8-sig" and "\r" not in doc.text
    assert doc.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert doc.body.startswith("A CHRISTMAS CAROL")
    assert "Gutenberg" not in doc.body and "Produced by" not in doc.body
    assert doc.text.index("*** START OF THE PROJECT GUTENBERG EBOOK") < doc.content_start
    assert doc.text.index("*** END OF THE PROJECT GUTENBERG EBOOK") >= doc.content_end
    assert "Foundation" in doc.text[doc.content_end :]  # the licence is still in the text, outside the body


def test_flattened_gutenberg_novel_loses_its_footer(data_dir: Path) -> None:
    [doc] = load_sources([data_dir / "graphrag-bench-novel" / "texts" / "Novel-10321.txt"])
    assert "\n" not in doc.text  # one line: markers are found inside lines
    assert doc.body.endswith("with sleepy cries of joy.")
    assert doc.text[doc.content_end :].strip().startswith("End of the Project Gutenberg EBook of Dragon's blood")


def test_old_style_markers_and_quoted_marker() -> None:
    text = (
        "Small print header text.\n*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\n\n"
        'The book. Some files ended with a line "End of The Project Gutenberg Etext...", said he.\n'
        "More book.\nEnd of Project Gutenberg's Book, by Someone\nlicence"
    )
    start, end = find_body(text)
    assert text[start:end] == (
        'The book. Some files ended with a line "End of The Project Gutenberg Etext...", said he.\nMore book.'
    )


def test_text_without_markers_is_whole_minus_outer_space() -> None:
    text = "\n\n  Just a story. It ends.  \n"
    start, end = find_body(text)
    assert text[start:end] == "Just a story. It ends."
