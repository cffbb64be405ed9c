"""Loading PDF, EPUB, Word, HTML and Markdown files made with the ordinary writers: the text,
its pages and sections where the test put them, and every bad input refused in one line."""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

import pytest

from helpers.documents import (drm_epub, encrypt_pdf, write_blank_pdf, write_docx, write_epub, write_html,
                               write_pdf, write_scanned_pdf, write_unmapped_pdf)
from pagerag.errors import InputError, PageRAGError
from pagerag.settings import ChunkSettings
from pagerag.text.chunk import chunk_document
from pagerag.text.load import load_sources

pytest.importorskip("reportlab", reason="the format tests need the writers of the test extra: pip install -e '.[test]'")

FILLER = "The widget is a sturdy little device, and it hums quietly while it works. "

# A manual: a chapter of three long paragraphs (so the PDF runs over several pages), then a
# chapter with a section holding a sentence the tests look for.
MANUAL = [
    ("h", 1, "1 Introduction"),
    *[("p", f"Paragraph {i}. " + FILLER * 20) for i in range(3)],
    ("h", 1, "3 Setup"),
    ("p", "Read the safety notes before you begin. " + FILLER * 4),
    ("h", 2, "3.2 Installing"),
    ("p", "Run the installer and wait for the green light. The zebra codeword is saffron."),
    ("p", FILLER * 6),
]
CODEWORD = "The zebra codeword is saffron."


def input_error(paths, **kwargs) -> str:
    with pytest.raises(InputError) as caught:
        load_sources(paths, **kwargs)
    message = str(caught.value)
    assert "\n" not in message and isinstance(caught.value, PageRAGError)
    return message


def where(doc, needle: str):
    """The place of `needle` in the document (a PDF may break its line anywhere)."""
    found = re.search(r"\s+".join(map(re.escape, needle.split())), doc.text)
    assert found, needle
    return doc.structure.place(found.start())


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The manual as a PDF (a running head, page numbers, roman labels on its first two pages),
    an EPUB, a Word file and a web page."""
    folder = tmp_path_factory.mktemp("formats")
    write_pdf(folder / "manual.pdf", MANUAL, title="Widget Manual", labels=True)
    write_epub(folder / "manual.epub", MANUAL, title="Widget Manual")
    write_docx(folder / "manual.docx", MANUAL)
    write_html(folder / "manual.html", MANUAL, title="Widget Manual")
    return folder


# --------------------------------------------------------------------------------------------
# Each format: text, pages, sections


def test_pdf_pages_sections_and_running_heads(folder: Path) -> None:
    [doc] = load_sources([folder / "manual.pdf"])
    structure = doc.structure
    assert structure.file == "manual.pdf" and structure.format == "pdf"
    assert len(structure.pages) >= 3  # the text runs over several pages
    place = where(doc, CODEWORD)
    assert place.section == ("3 Setup", "3.2 Installing")
    last = structure.pages[-1]
    assert place.page == last.number and place.page_label == str(last.number - 2)  # i, ii, then 1, 2, …
    assert where(doc, "Paragraph 0.").page == 1 and where(doc, "Paragraph 0.").page_label == "i"
    assert where(doc, "Paragraph 0.").section == ("1 Introduction",)
    # the running head and the page numbers are not text of the book
    assert "Widget Manual" not in doc.text and "Page 2" not in doc.text
    # paragraphs are apart by a blank line; lines of one paragraph by a line break
    assert "\n\nParagraph 1." in doc.text and "\n\nRun the installer" in doc.text
    assert doc.text.count("\n\n") <= 2 * len(MANUAL)


def test_pdf_text_is_the_same_as_the_words_written(folder: Path) -> None:
    [doc] = load_sources([folder / "manual.pdf"])
    written = " ".join(b[-1] for b in MANUAL)
    assert doc.text.split() == written.split()


def test_epub_chapters_and_nested_sections(folder: Path) -> None:
    [doc] = load_sources([folder / "manual.epub"])
    assert doc.structure.format == "epub" and doc.structure.pages == []
    assert [(h.level, h.title) for h in doc.structure.headings] == [(1, "1 Introduction"), (1, "3 Setup"), (2, "3.2 Installing")]
    assert where(doc, CODEWORD).section == ("3 Setup", "3.2 Installing")
    assert where(doc, "Read the safety notes").section == ("3 Setup",)
    assert doc.text.split() == " ".join(b[-1] for b in MANUAL).split()  # no table-of-contents page text


def test_docx_headings_lists_tables_and_tracked_insertions(folder: Path) -> None:
    import docx
    from docx.oxml import parse_xml

    document = docx.Document()
    document.add_heading("Widget Manual", 0)  # the title: not a section
    document.add_heading("3 Setup", 1)
    document.add_paragraph("Read the safety notes.")
    document.add_heading("3.2 Installing", 2)
    paragraph = document.add_paragraph("Run the installer ")
    paragraph._p.append(parse_xml(  # a tracked insertion (python-docx's own .text would miss it)
        '<w:ins xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" w:id="1" w:author="a">'
        f"<w:r><w:t>and wait. {CODEWORD}</w:t></w:r></w:ins>"))
    document.add_paragraph("Open the box.", style="List Bullet")
    document.add_paragraph("Plug it in.", style="List Bullet")
    document.add_paragraph("First step.", style="List Number")
    document.add_paragraph("Second step.", style="List Number")
    table = document.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "Part", (0, 1): "Count", (1, 0): "Screw", (1, 1): "4"}.items():
        table.cell(r, c).text = text
    document.add_heading("4 Use", 1)
    document.add_paragraph("Press the button.")
    document.save(folder / "styled.docx")
    [doc] = load_sources([folder / "styled.docx"])
    assert doc.structure.format == "docx"
    assert where(doc, CODEWORD).section == ("3 Setup", "3.2 Installing")
    assert where(doc, "Press the button").section == ("4 Use",)
    assert where(doc, "Widget Manual").section == ()
    assert "- Open the box.\n- Plug it in.\n1. First step.\n2. Second step." in doc.text
    assert "Part | Count\nScrew | 4" in doc.text


def test_html_main_text_without_navigation(folder: Path) -> None:
    [doc] = load_sources([folder / "manual.html"])
    assert doc.structure.format == "html"
    assert where(doc, CODEWORD).section == ("3 Setup", "3.2 Installing")
    for boilerplate in ("Products", "Related products", "Copyright", "Privacy", "tracking", "Widget Co."):
        assert boilerplate not in doc.text
    assert doc.text.split() == " ".join(b[-1] for b in MANUAL).split()


def test_html_page_without_semantic_markup_loses_its_menus(folder: Path) -> None:
    page = ('<html><body><div id="top-menu"><a href="/">Home</a> | <a href="/d">Docs</a> | <a href="/b">Blog</a></div>'
            '<div class="links"><ul><li><a href="/1">One</a></li><li><a href="/2">Two</a></li><li><a href="/3">Three</a>'
            '</li></ul></div><div id="content"><h1>Title</h1><p>Body text with <a href="/q">one link</a> in it.</p>'
            '</div><div class="site-footer">Copyright 2024</div></body></html>')
    (folder / "plain.htm").write_text(page, encoding="utf-8")
    [doc] = load_sources([folder / "plain.htm"])
    assert doc.text == "Title\n\nBody text with one link in it."


def test_markdown_headings_but_not_in_code(tmp_path: Path) -> None:
    text = ("Intro.\n\n# Guide\n\nText.\n\n```\n# not a heading\n```\n\nSetup\n-----\n\n"
            "Run it. The *zebra* codeword is saffron.\n\n> # quoted, not a heading\n")
    (tmp_path / "guide.md").write_text(text, encoding="utf-8")
    [doc] = load_sources([tmp_path / "guide.md"])
    assert doc.text == text  # Markdown stays the file's own text
    assert [(h.level, h.title) for h in doc.structure.headings] == [(1, "Guide"), (2, "Setup")]
    assert where(doc, "Run it.").section == ("Guide", "Setup")
    assert where(doc, "Intro.").section == ()


def test_gutenberg_licence_is_cut_from_an_epub(tmp_path: Path) -> None:
    blocks = [("h", 1, "The Project Gutenberg eBook of Widgets"),
              ("p", "This eBook is for the use of anyone anywhere.\n*** START OF THE PROJECT GUTENBERG EBOOK WIDGETS ***"),
              ("h", 1, "Chapter I"), ("p", "It was a dark and stormy night. " * 5),
              ("h", 1, "Chapter II"), ("p", "The end came. *** END OF THE PROJECT GUTENBERG EBOOK WIDGETS ***"),
              ("p", "Section 1. General Terms of Use and Redistributing Project Gutenberg electronic works.")]
    [doc] = load_sources([write_epub(tmp_path / "pg.epub", blocks)])
    assert doc.body.startswith("Chapter I\n\nIt was a dark") and doc.body.endswith("The end came.")
    assert [h.title for h in doc.structure.headings] == ["Chapter I", "Chapter II"]  # not the licence's title


# --------------------------------------------------------------------------------------------
# Chunking keeps to sections; passages carry page and section


def test_no_passage_runs_across_a_section(folder: Path) -> None:
    [doc] = load_sources([folder / "manual.pdf"])
    passages = chunk_document(doc, ChunkSettings(tokens=120))
    breaks = doc.structure.breaks()
    for p in passages:
        assert doc.text[p.start : p.end] == p.text
        assert not any(p.start < b < p.end for b in breaks), p.text
        assert p.page == doc.structure.page_at(p.start).number
        assert tuple(p.section) == doc.structure.section_at(p.start)
    holding = [p for p in passages if "zebra codeword" in p.text]
    assert holding and all(p.section == ["3 Setup", "3.2 Installing"] for p in holding)
    # the text is covered: every sentence is in some passage
    assert all(any(s in p.text for p in passages) for s in ("Paragraph 2.", "Read the safety notes"))


def test_plain_text_chunks_as_before(tmp_path: Path) -> None:
    """A text file has no structure map: nothing is cut, no page, no section."""
    text = "# Not markdown here\n\n" + "A sentence of the book goes on. " * 200
    (tmp_path / "book.txt").write_text(text, encoding="utf-8")
    [doc] = load_sources([tmp_path / "book.txt"])
    assert doc.structure.headings == [] and doc.structure.format == "text"
    passages = chunk_document(doc, ChunkSettings())
    assert all(p.page is None and p.section == [] for p in passages)


# --------------------------------------------------------------------------------------------
# Bad input: one line naming the file and the problem


def test_encrypted_pdf_needs_its_password(folder: Path) -> None:
    path = encrypt_pdf(folder / "manual.pdf", folder / "locked.pdf", "s3cret")
    assert "locked.pdf: the PDF is encrypted: give its password with --password" in input_error([path])
    assert "locked.pdf: the PDF is encrypted and --password is not its password" in input_error([path], password="nope")
    [doc] = load_sources([path], password="s3cret")
    assert where(doc, CODEWORD).section == ("3 Setup", "3.2 Installing")


def test_scanned_pdf_names_its_pages_and_says_to_ocr(tmp_path: Path) -> None:
    message = input_error([write_scanned_pdf(tmp_path / "scan.pdf", pages=3)])
    assert "scan.pdf: no text layer on pages 1-3 of 3 (a scanned document?)" in message and "OCR" in message


def test_pdf_with_a_few_pages_without_text_is_built_with_a_note(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    write_pdf(tmp_path / "text.pdf", MANUAL, running=False)
    write_scanned_pdf(tmp_path / "figure.pdf", pages=1)
    writer = PdfWriter(clone_from=PdfReader(tmp_path / "text.pdf"))
    writer.append(PdfReader(tmp_path / "figure.pdf"))
    writer.write(tmp_path / "mixed.pdf")
    notes: list[str] = []
    [doc] = load_sources([tmp_path / "mixed.pdf"], notes=notes)
    pages = len(doc.structure.pages)
    assert notes == [f"mixed.pdf: page {pages} has no text layer (images or blank) and is left out"]


def test_pdf_with_a_garbage_text_layer(tmp_path: Path) -> None:
    lines = [f"Line {i}: the installer copies the files into place and then waits." for i in range(25)]
    message = input_error([write_unmapped_pdf(tmp_path / "glyphs.pdf", lines)])
    assert "glyphs.pdf: the PDF's text layer is garbage" in message and "unmapped glyphs" in message
    assert "pages 1-2" in message and "OCR" in message


def test_blank_pdf_is_an_empty_document(tmp_path: Path) -> None:
    assert "blank.pdf: no text in this PDF (an empty document)" in input_error([write_blank_pdf(tmp_path / "blank.pdf")])


def test_not_a_pdf(tmp_path: Path) -> None:
    (tmp_path / "fake.pdf").write_bytes(b"%PDF-1.7\nthis is not really a PDF\n" * 10)
    assert "fake.pdf: not a readable PDF" in input_error([tmp_path / "fake.pdf"])


def test_drm_protected_epub(folder: Path) -> None:
    path = drm_epub(folder / "manual.epub", folder / "locked.epub")
    assert "locked.epub: the EPUB is DRM-protected" in input_error([path])


def test_corrupt_epubs(folder: Path, tmp_path: Path) -> None:
    raw = (folder / "manual.epub").read_bytes()
    (tmp_path / "cut.epub").write_bytes(raw[: len(raw) // 2])
    assert "cut.epub: not an EPUB: it is not a zip file" in input_error([tmp_path / "cut.epub"])
    with zipfile.ZipFile(tmp_path / "nocontainer.epub", "w") as z:
        z.writestr("mimetype", "application/epub+zip")
    assert "nocontainer.epub: not a valid EPUB: META-INF/container.xml is missing" in input_error([tmp_path / "nocontainer.epub"])
    with zipfile.ZipFile(folder / "manual.epub") as zin, zipfile.ZipFile(tmp_path / "badxml.epub", "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, zin.read(info)[:40] if info.filename.endswith(".opf") else zin.read(info))
    assert "badxml.epub: damaged EPUB: 'EPUB/content.opf' is not well-formed XML" in input_error([tmp_path / "badxml.epub"])


def test_docx_that_is_not_a_zip(tmp_path: Path) -> None:
    (tmp_path / "letter.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1 an old binary .doc renamed")
    assert "letter.docx: not a Word document: it is not a zip file" in input_error([tmp_path / "letter.docx"])


def test_empty_documents(tmp_path: Path) -> None:
    import docx

    docx.Document().save(tmp_path / "empty.docx")
    assert "empty.docx: no text in this DOCX file (an empty document)" in input_error([tmp_path / "empty.docx"])
    write_epub(tmp_path / "empty.epub", [("p", " ")])
    assert "empty.epub: no text in this EPUB file" in input_error([tmp_path / "empty.epub"])
    (tmp_path / "menu.html").write_text("<html><body><nav><a href=/>Home</a></nav><footer>(c)</footer></body></html>")
    assert "menu.html: no text in this HTML file" in input_error([tmp_path / "menu.html"])


def test_size_limits(folder: Path, tmp_path: Path) -> None:
    message = input_error([folder / "manual.pdf"], settings=ChunkSettings(max_file_mb=0.001))
    assert "manual.pdf: file is too large" in message and "chunk.max_file_mb" in message
    # a zip bomb: a small file whose chapter unpacks to far more than the limit
    with zipfile.ZipFile(folder / "manual.epub") as zin, zipfile.ZipFile(tmp_path / "bomb.epub", "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("chapter01.xhtml"):
                data = data.replace(b"</body>", b"<p>" + b" " * 3_000_000 + b"</p></body>")
            zout.writestr(info.filename, data)
    assert (tmp_path / "bomb.epub").stat().st_size < 100_000
    message = input_error([tmp_path / "bomb.epub"], settings=ChunkSettings(max_unpacked_mb=1))
    assert "bomb.epub: its text unpacks to more than 1 MB" in message and "chunk.max_unpacked_mb" in message


def test_a_folder_of_every_format_skips_the_rest(folder: Path, tmp_path: Path) -> None:
    import shutil

    shelf = tmp_path / "shelf"
    shelf.mkdir()
    for name in ("manual.pdf", "manual.epub", "manual.docx", "manual.html"):
        shutil.copy(folder / name, shelf / name)
    (shelf / "cover.png").write_bytes(b"\x89PNG")
    (shelf / "notes.odt").write_bytes(b"PK")
    notes: list[str] = []
    docs = load_sources([shelf], notes=notes)
    assert [d.structure.format for d in docs] == ["docx", "epub", "html", "pdf"]
    assert [d.doc_id for d in docs] == ["manual", "manual-2", "manual-3", "manual-4"]
    assert notes == ["skipped 2 unsupported files (not .txt, .md, .pdf, .epub, .html, .docx): cover.png, notes.odt"]


def test_a_malformed_part_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    with zipfile.ZipFile(tmp_path / "odd.docx", "w") as z:
        z.writestr("word/document.xml", f'<w:document xmlns:w="{w}"><w:body><w:p><w:pPr><w:outlineLvl w:val="x"/>'
                                        "</w:pPr><w:r><w:t>Title</w:t></w:r></w:p></w:body></w:document>")
    message = input_error([tmp_path / "odd.docx"])
    assert "odd.docx: cannot read this DOCX file, it is damaged or malformed (ValueError" in message
