"""Real PDF, EPUB, Word and HTML files made with the ordinary writers (reportlab, ebooklib,
python-docx; pypdf to encrypt), for the loaders' tests and the cross-format benchmark.

A document is a list of blocks: ("h", level, title) a heading, ("p", text) a paragraph (a "\\n"
in it is a line break the file keeps: <br/> in HTML, a Word line break, a PDF line), ("page",)
a page break (PDF only). The writers are test tools (the `test` extra), never imported by
pagerag itself; ebooklib is AGPL, which is why the loaders do not use it.
"""
from __future__ import annotations

import html
import io
import re
import zipfile
from pathlib import Path

Block = tuple
CHAPTER = re.compile(r"^(?:STAVE|CHAPTER|BOOK|PART|VOLUME)\s+[A-Z0-9IVXLC]+[.:]?$", re.IGNORECASE)


# A manual: a chapter of three long paragraphs (a PDF of it runs over three A5 pages), then a
# chapter with a section "3 Setup › 3.2 Installing" that says a codeword of the format's own.
FORMAT_CODEWORDS = {"pdf": "saffron", "epub": "turquoise", "docx": "vermilion", "html": "ochre"}


def format_manual(fmt: str) -> list[Block]:
    filler = "The widget is a sturdy little device, and it hums quietly while it works. "
    return [
        ("h", 1, "1 Introduction"),
        *[("p", f"Paragraph {i} of the {fmt} manual. " + filler * 20) for i in range(3)],
        ("h", 1, "3 Setup"),
        ("p", "Read the safety notes before you begin. " + filler * 4),
        ("h", 2, "3.2 Installing"),
        ("p", f"Run the installer and wait for the green light. The {fmt} codeword is {FORMAT_CODEWORDS[fmt]}."),
        ("p", filler * 6),
    ]


def book_blocks(text: str) -> list[Block]:
    """A plain-text book as blocks: its paragraphs (apart by blank lines), each keeping its line
    breaks; a paragraph that is only "STAVE ONE", "CHAPTER IV", "Book 2", … is a chapter heading."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    blocks: list[Block] = []
    for paragraph in re.split(r"\n[ \t]*\n\s*", text.strip()):
        lines = [line.rstrip() for line in paragraph.split("\n")]
        if len(lines) == 1 and CHAPTER.match(lines[0].strip()):
            blocks.append(("h", 1, lines[0].strip()))
        else:
            blocks.append(("p", "\n".join(lines)))
    return blocks


# --------------------------------------------------------------------------------------------
# PDF


def write_pdf(path: Path, blocks: list[Block], *, title: str = "Document", running: bool = True,
              labels: bool = False, font_size: float = 10.0, page_size: str = "A5") -> Path:
    """A PDF with a text layer: headings as bookmarks (the outline), a running head and a page
    number on every page when `running`, and roman page labels on the first two pages when
    `labels` (then 1, 2, … from the third). `page_size` A5 or A4 (lines of a plain-text book
    fit an A4 line)."""
    from reportlab.lib import pagesizes
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    body = ParagraphStyle("body", fontName="Times-Roman", fontSize=font_size, leading=font_size * 1.2,
                          spaceBefore=font_size * 0.6)
    heads = {level: ParagraphStyle(f"h{level}", fontName="Helvetica-Bold", fontSize=font_size + 8 - 2 * level,
                                   leading=(font_size + 8 - 2 * level) * 1.25, spaceBefore=font_size, spaceAfter=4,
                                   keepWithNext=True) for level in range(1, 5)}

    class Heading(Paragraph):
        """A heading that adds itself to the outline where it is drawn."""

        def __init__(self, text: str, level: int, key: str):
            super().__init__(html.escape(text), heads[min(level, 4)])
            self.outline = (text, level, key)

        def draw(self):
            text, level, key = self.outline
            self.canv.bookmarkHorizontal(key, 0, self.height)
            self.canv.addOutlineEntry(text, key, level=level - 1)
            super().draw()

    story = []
    for n, block in enumerate(blocks):
        if block[0] == "h":
            story.append(Heading(block[2], block[1], f"h{n}"))
        elif block[0] == "p":
            story.append(Paragraph(html.escape(block[1]).replace("\n", "<br/>"), body))
        elif block[0] == "page":
            story.append(PageBreak())

    def decorate(canvas, doc):
        if running:
            canvas.setFont("Helvetica", 8)
            canvas.drawString(doc.leftMargin, doc.pagesize[1] - 30, title)
            canvas.drawRightString(doc.pagesize[0] - doc.rightMargin, 25, f"Page {doc.page}")

    buffer = io.BytesIO()
    SimpleDocTemplate(buffer, pagesize=getattr(pagesizes, page_size), title=title).build(
        story, onFirstPage=decorate, onLaterPages=decorate)
    data = buffer.getvalue()
    if labels:
        data = _with_labels(data)
    path.write_bytes(data)
    return path


def _with_labels(data: bytes) -> bytes:
    from pypdf import PdfReader, PdfWriter
    from pypdf.constants import PageLabelStyle

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.set_page_label(0, 1, style=PageLabelStyle.LOWERCASE_ROMAN)
    writer.set_page_label(2, len(writer.pages) - 1, style=PageLabelStyle.DECIMAL, start=1)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def encrypt_pdf(source: Path, target: Path, password: str) -> Path:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(source))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="AES-128")
    with open(target, "wb") as fh:
        writer.write(fh)
    return target


def write_scanned_pdf(path: Path, pages: int = 3) -> Path:
    """Pages that are only pictures of text (what a scanner makes): no text layer."""
    from PIL import Image, ImageDraw
    from reportlab.lib.pagesizes import A5
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A5)
    for page in range(pages):
        image = Image.new("L", (420, 595), 255)
        draw = ImageDraw.Draw(image)
        for line in range(20):
            draw.text((30, 30 + 25 * line), f"Scanned page {page + 1}, line {line + 1}: ink on paper.", fill=0)
        c.drawImage(ImageReader(image), 0, 0, width=A5[0], height=A5[1])
        c.showPage()
    c.save()
    return path


def write_blank_pdf(path: Path, pages: int = 2) -> Path:
    from reportlab.lib.pagesizes import A5
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A5)
    for _ in range(pages):
        c.showPage()
    c.save()
    return path


def write_unmapped_pdf(path: Path, lines: list[str], pages: int = 2) -> Path:
    """Text drawn with an embedded TrueType font as a CID font (Identity-H: the bytes are glyph
    numbers) and no ToUnicode map: viewers show the text, but its text layer extracts as glyph
    numbers read as characters. This is how real PDFs end up with a garbage text layer."""
    import reportlab
    from pypdf import PdfWriter
    from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject, NumberObject
    from reportlab.pdfbase.ttfonts import TTFontFile

    font_path = Path(reportlab.__file__).parent / "fonts" / "Vera.ttf"
    glyphs = TTFontFile(str(font_path)).charToGlyph
    writer = PdfWriter()
    name = NameObject

    file_stream = DecodedStreamObject()
    file_stream.set_data(font_path.read_bytes())
    descriptor = writer._add_object(DictionaryObject({
        name("/Type"): name("/FontDescriptor"), name("/FontName"): name("/Vera"), name("/Flags"): NumberObject(32),
        name("/FontBBox"): ArrayObject([NumberObject(v) for v in (-183, -236, 1287, 928)]),
        name("/ItalicAngle"): NumberObject(0), name("/Ascent"): NumberObject(928), name("/Descent"): NumberObject(-236),
        name("/CapHeight"): NumberObject(729), name("/StemV"): NumberObject(80),
        name("/FontFile2"): writer._add_object(file_stream)}))
    cid_font = writer._add_object(DictionaryObject({
        name("/Type"): name("/Font"), name("/Subtype"): name("/CIDFontType2"), name("/BaseFont"): name("/Vera"),
        name("/CIDSystemInfo"): DictionaryObject(), name("/FontDescriptor"): descriptor,
        name("/CIDToGIDMap"): name("/Identity"), name("/DW"): NumberObject(600)}))
    font = writer._add_object(DictionaryObject({
        name("/Type"): name("/Font"), name("/Subtype"): name("/Type0"), name("/BaseFont"): name("/Vera"),
        name("/Encoding"): name("/Identity-H"), name("/DescendantFonts"): ArrayObject([cid_font])}))
    for _ in range(pages):
        page = writer.add_blank_page(420, 595)
        ops = ["BT", "/F1 10 Tf", "13 TL", "30 560 Td"]
        for line in lines:
            ops.append("<" + "".join(f"{glyphs.get(ord(ch), 0):04x}" for ch in line) + "> Tj T*")
        ops.append("ET")
        content = DecodedStreamObject()
        content.set_data("\n".join(ops).encode("ascii"))
        page[name("/Contents")] = writer._add_object(content)
        page[name("/Resources")] = DictionaryObject({name("/Font"): DictionaryObject({name("/F1"): font})})
    with open(path, "wb") as fh:
        writer.write(fh)
    return path


# --------------------------------------------------------------------------------------------
# EPUB


def write_epub(path: Path, blocks: list[Block], *, title: str = "Document") -> Path:
    """An EPUB 3 (with an EPUB 2 NCX) made by ebooklib: one chapter file per level-1 heading,
    every heading in the nested table of contents, linked to its own anchor."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("pagerag-test-" + path.stem)
    book.set_title(title)
    book.set_language("en")
    chapters: list[list[Block]] = [[]]
    for block in blocks:
        if block[0] == "h" and block[1] == 1 and chapters[-1]:
            chapters.append([])
        if block[0] != "page":
            chapters[-1].append(block)
    items, toc = [], []
    stack: list[tuple[int, list]] = [(0, toc)]
    for c, chapter in enumerate(chapters):
        name = f"chapter{c + 1:02d}.xhtml"
        parts = []
        for b, block in enumerate(chapter):
            if block[0] == "h":
                anchor = f"h{b}"
                parts.append(f'<h{block[1]} id="{anchor}">{html.escape(block[2])}</h{block[1]}>')
                while stack[-1][0] >= block[1]:
                    stack.pop()
                children: list = []
                stack[-1][1].append((epub.Section(block[2], href=f"{name}#{anchor}"), children))
                stack.append((block[1], children))
            else:
                parts.append("<p>" + html.escape(block[1]).replace("\n", "<br/>") + "</p>")
        item = epub.EpubHtml(title=f"Chapter {c + 1}", file_name=name, lang="en")
        item.content = "<html><body>" + "\n".join(parts) + "</body></html>"
        book.add_item(item)
        items.append(item)
    book.toc = [_plain_links(entry) for entry in toc]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items]
    epub.write_epub(str(path), book)
    return path


def _plain_links(entry):
    """ebooklib's toc: a Link for a leaf, (Section, children) for an entry with children."""
    from ebooklib import epub

    section, children = entry
    if not children:
        return epub.Link(section.href, section.title, section.href.replace("#", "-"))
    return (section, [_plain_links(child) for child in children])


def drm_epub(source: Path, target: Path) -> Path:
    """`source` as a DRM-protected book: its chapters encrypted and declared so in
    META-INF/encryption.xml, as Adobe ADEPT and similar schemes do."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w") as zout:
        chapters = [n for n in zin.namelist() if n.endswith(".xhtml") and "chapter" in n]
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename in chapters:
                data = bytes((b * 7 + 13) % 256 for b in data)  # not the text any more
            zout.writestr(info, data)
        refs = "".join(
            f'<EncryptedData xmlns="http://www.w3.org/2001/04/xmlenc#"><EncryptionMethod '
            f'Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/><CipherData><CipherReference URI="{n}"/>'
            f"</CipherData></EncryptedData>" for n in chapters)
        zout.writestr("META-INF/encryption.xml",
                      f'<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container">{refs}</encryption>')
    return target


# --------------------------------------------------------------------------------------------
# Word


def write_docx(path: Path, blocks: list[Block]) -> Path:
    import docx

    document = docx.Document()
    for block in blocks:
        if block[0] == "h":
            document.add_heading(block[2], block[1])
        elif block[0] == "p":
            lines = block[1].split("\n")
            run = document.add_paragraph().add_run(lines[0])
            for line in lines[1:]:
                run.add_break()
                run.add_text(line)
    document.save(str(path))
    return path


# --------------------------------------------------------------------------------------------
# HTML


def write_html(path: Path, blocks: list[Block], *, title: str = "Document") -> Path:
    """A web page: the document as an <article> inside <main>, between a site header with a
    navigation menu, a sidebar and a footer that are not the document."""
    parts = []
    for block in blocks:
        if block[0] == "h":
            parts.append(f"<h{block[1]}>{html.escape(block[2])}</h{block[1]}>")
        elif block[0] == "p":
            parts.append("<p>" + html.escape(block[1]).replace("\n", "<br>") + "</p>")
    menu = "".join(f'<li><a href="/{w.lower()}">{w}</a></li>' for w in ("Home", "Products", "Support", "Blog", "Contact"))
    page = (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<style>body{{font-family:serif}}</style></head><body>"
            f'<header><a class=logo href="/">Widget Co.</a><nav><ul>{menu}</ul></nav></header>'
            f"<main><article>{''.join(parts)}</article></main>"
            f'<aside><h2>Related products</h2><ul><li><a href="/x">Widget Pro sale</a></li></ul></aside>'
            f"<footer><p>Copyright 2024 Widget Co. All rights reserved.</p><a href=/privacy>Privacy</a></footer>"
            f"<script>console.log('tracking')</script></body></html>")
    path.write_text(page, encoding="utf-8")
    return path
