"""`pagerag build` on PDFs, EPUBs and Word files it cannot use: one line naming the file and
the problem, a non-zero exit, nothing published; an encrypted PDF with its password, and a
folder with files of other kinds (listed, skipped), build."""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from helpers.documents import drm_epub, encrypt_pdf, write_blank_pdf, write_scanned_pdf, write_unmapped_pdf
from test_cli_build import assert_one_line_error, run_cli

pytest.importorskip("reportlab", reason="the format tests need the writers of the test extra: pip install -e '.[test]'")


@pytest.fixture(scope="module")
def bad(formats_folder: Path, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bad")
    encrypt_pdf(formats_folder / "manual.pdf", folder / "locked.pdf", "s3cret")
    write_scanned_pdf(folder / "scan.pdf")
    write_blank_pdf(folder / "blank.pdf")
    write_unmapped_pdf(folder / "glyphs.pdf", [f"Line {i}: the installer copies the files into place." for i in range(25)])
    drm_epub(formats_folder / "guide.epub", folder / "drm.epub")
    raw = (formats_folder / "guide.epub").read_bytes()
    (folder / "cut.epub").write_bytes(raw[: len(raw) // 2])
    (folder / "letter.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1 an old .doc renamed")
    with zipfile.ZipFile(folder / "empty.docx", "w") as z:  # a Word file with an empty body
        z.writestr("word/document.xml", '<w:document xmlns:w="http://schemas.openxmlformats.org/'
                                        'wordprocessingml/2006/main"><w:body/></w:document>')
    return folder


@pytest.mark.parametrize("name,fragments", [
    ("locked.pdf", ["the PDF is encrypted: give its password with --password"]),
    ("scan.pdf", ["no text layer on pages 1-3 of 3 (a scanned document?)", "OCR"]),
    ("blank.pdf", ["no text in this PDF (an empty document)"]),
    ("glyphs.pdf", ["the PDF's text layer is garbage", "unmapped glyphs"]),
    ("drm.epub", ["the EPUB is DRM-protected"]),
    ("cut.epub", ["not an EPUB: it is not a zip file"]),
    ("letter.docx", ["not a Word document: it is not a zip file"]),
    ("empty.docx", ["no text in this DOCX file (an empty document)"]),
])
def test_unusable_documents(bad: Path, tmp_path: Path, name: str, fragments: list[str]):
    result = run_cli("build", str(bad / name), "--repo", str(tmp_path / "r"))
    assert_one_line_error(result, f"{name}: ", *fragments)
    assert not (tmp_path / "r").exists()


def test_wrong_password_and_size_limit(bad: Path, formats_folder: Path, tmp_path: Path):
    result = run_cli("build", str(bad / "locked.pdf"), "--repo", str(tmp_path / "r"), "--password", "nope")
    assert_one_line_error(result, "locked.pdf: the PDF is encrypted and --password is not its password")
    result = run_cli("build", str(formats_folder / "guide.epub"), "--repo", str(tmp_path / "r"),
                     "--set", "chunk.max_file_mb=0.001")
    assert_one_line_error(result, "guide.epub: file is too large", "chunk.max_file_mb")
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_folder_builds_its_documents_and_lists_what_it_skips(bad: Path, formats_folder: Path, tmp_path: Path):
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    (shelf / "locked.pdf").write_bytes((bad / "locked.pdf").read_bytes())
    (shelf / "cover.png").write_bytes(b"\x89PNG\r\n")
    env = dict(os.environ, PAGERAG_PDF_PASSWORD="s3cret")  # the password kept out of the process list
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "pagerag", "build", str(shelf), "--repo", str(tmp_path / "r"), "-q"],
                            capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stderr
    assert "note: skipped 1 unsupported file (not .txt, .md, .pdf, .epub, .html, .docx): cover.png" in result.stderr
    assert result.stdout.startswith(f"built {tmp_path / 'r'}:")
    assert (tmp_path / "r" / "sources" / "locked.structure.json").is_file()
