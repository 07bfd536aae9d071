"""Real files made in the test: PDFs through fpdf2, Word files through python-docx, HTML pages.

Each builder returns the file's bytes. The PDFs place every line themselves (``FPDF.text`` at a
position), so a test knows exactly where a line ends, which page it is on, and in which order
the content stream draws the lines.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

from fpdf import FPDF

BODY = (
    "The supplier shall deliver the goods to the buyer at the agreed place and time, "
    "and the buyer shall pay the price stated in the order."
)


def pdf_document() -> FPDF:
    pdf = FPDF(format="A4", unit="pt")
    pdf.set_auto_page_break(False)
    pdf.set_compression(True)
    pdf.core_fonts_encoding = "windows-1252"  # curly quotes and dashes in the core fonts
    return pdf


def draw_lines(
    pdf: FPDF, lines: Sequence[str], *, x: float = 72, top: float = 120, pitch: float = 15
) -> float:
    y = top
    for line in lines:
        pdf.text(x, y, line)
        y += pitch
    return y


SECTIONS = ("Definitions", "Delivery of Goods", "Payment", "Termination", "Notices")
CLAUSES = (
    "Words in capitals have the meaning given to them in this section.",
    "The supplier delivers the goods to the warehouse named in the order.",
    "The buyer pays each invoice within thirty days of its date.",
    "Either party may end this agreement with ninety days notice.",
    "Notices are sent by registered mail to the addresses above.",
)

HYPHENATED = (
    ("and the parties record that this agree-", "ment binds their successors."),
    ("and the goods are ready for deliv-", "ery on the first working day."),
    ("and the invoice states the pay-", "ment due and the bank account."),
    ("and the notice period is ninety", "days from the date of the letter."),
    ("and copies go by electronic", "mail to the named contacts."),
)
SECOND = (
    "Definitions apply to the whole document and its schedules.",
    "Risk passes to the buyer when the goods arrive.",
    "Late payment carries interest at the legal rate.",
    "Rights that accrued before the end survive it.",
    "A notice takes effect when it is received.",
)


def report_pdf(*, pages: int = 3) -> bytes:
    """A multi-page report: a running header and footer with the page number on every page, a
    bold 18pt title, a bold 14pt section heading on each page, body lines in 11pt, and on each
    page a word hyphenated across a line end ("agree-" / "ment", "deliv-" / "ery")."""
    pdf = pdf_document()
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("Helvetica", "", 9)
        pdf.text(72, 40, "ACME Supply Agreement - Confidential")
        pdf.text(290, 810, str(number))
        pdf.text(400, 810, f"Page {number} of {pages}")
        y = 100.0
        if number == 1:
            pdf.set_font("Helvetica", "B", 18)
            pdf.text(72, y, "Supply Agreement")
            y += 40
        pdf.set_font("Helvetica", "B", 14)
        pdf.text(72, y, f"{number}. {SECTIONS[number - 1]}")
        y += 28
        pdf.set_font("Helvetica", "", 11)
        y = draw_lines(pdf, [CLAUSES[number - 1], *HYPHENATED[number - 1]], top=y)
        draw_lines(pdf, [SECOND[number - 1]], top=y + 12)  # a wider gap: a new paragraph
    return bytes(pdf.output())


def outline_pdf() -> bytes:
    """Two pages whose headings are plain body text, but named by the PDF's outline (bookmarks)."""
    pdf = pdf_document()
    pdf.set_font("Helvetica", "", 11)
    for title in ("Introduction", "Payment Terms"):
        pdf.add_page()
        pdf.start_section(title, level=0)
        draw_lines(
            pdf, [title, f"Body of {title.lower()}: {BODY[:70]}", "It goes on for another line."], top=100
        )
    return bytes(pdf.output())


LEFT_COLUMN = [
    "Left column line one about",
    "the delivery of the goods and",
    "the place where they arrive",
    "and the time they are due to",
    "arrive at the buyer's site.",
    "The left column ends here.",
]
RIGHT_COLUMN = [
    "Right column line one about",
    "the price of the goods and",
    "how the buyer pays for them",
    "within thirty days of the",
    "invoice that the seller sends.",
    "The right column ends here.",
]


def two_column_pdf() -> bytes:
    """One page with a full-width title and two columns of prose, drawn row by row across both
    columns (left line 1, right line 1, left line 2, ...): the order the stream gives is wrong."""
    pdf = pdf_document()
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    pdf.text(72, 80, "A full width title line that spans across both of the columns below")
    y = 120.0
    for left, right in zip(LEFT_COLUMN, RIGHT_COLUMN, strict=True):
        pdf.text(72, y, left)
        pdf.text(320, y, right)
        y += 15
    return bytes(pdf.output())


def encrypted_pdf() -> bytes:
    pdf = pdf_document()
    pdf.set_encryption(owner_password="owner-secret", user_password="user-secret")
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    draw_lines(pdf, ["Secret text nobody should read without the password."])
    return bytes(pdf.output())


def image_only_pdf(*, pages: int = 2) -> bytes:
    """A "scan": every page is a picture, with no text layer."""
    from PIL import Image, ImageDraw

    pdf = pdf_document()
    for _ in range(pages):
        image = Image.new("RGB", (400, 300), "white")
        draw = ImageDraw.Draw(image)
        for row in range(10):
            draw.rectangle((20, 20 + row * 25, 380, 30 + row * 25), fill="black")
        pdf.add_page()
        pdf.image(image, x=72, y=72, w=400)
    return bytes(pdf.output())


def plain_pdf(lines: Sequence[str], *, pages: int = 1) -> bytes:
    pdf = pdf_document()
    pdf.set_font("Helvetica", "", 11)
    for _ in range(pages):
        pdf.add_page()
        draw_lines(pdf, lines)
    return bytes(pdf.output())


def heading_docx() -> bytes:
    """A Word file: a Title, Heading 1 and Heading 2 paragraphs, body text and a 3x3 table."""
    import docx

    document = docx.Document()
    document.add_heading("Service Agreement", level=0)
    document.add_paragraph("This agreement sets out the service terms.")
    document.add_heading("Scope", level=1)
    document.add_paragraph("The provider runs the service every day.")
    document.add_heading("Fees", level=2)
    table = document.add_table(rows=3, cols=3)
    for row, values in enumerate(
        (("Plan", "Price", "Term"), ("Basic", "10 EUR", "1 month"), ("Pro", "90 EUR", "1 year"))
    ):
        for column, value in enumerate(values):
            table.cell(row, column).text = value
    document.add_paragraph("Fees are paid in advance.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def entity_docx(body: str, *, declarations: str) -> bytes:
    """A Word file of one paragraph ``body`` (raw XML text: entity references in it stay references)
    and a second one, "Next paragraph.", whose document.xml declares ``declarations`` in its DTD,
    as a hand-edited or generated file may."""
    import docx

    document = docx.Document()
    document.add_paragraph("MARK")
    document.add_paragraph("Next paragraph.")
    out = io.BytesIO()
    document.save(out)
    source = zipfile.ZipFile(io.BytesIO(out.getvalue()))
    edited = io.BytesIO()
    with zipfile.ZipFile(edited, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "word/document.xml":
                head, rest = data.decode().replace("MARK", body).split("?>", 1)
                data = f"{head}?><!DOCTYPE w:document [{declarations}]>{rest}".encode()
            archive.writestr(item, data)
    return edited.getvalue()


ARTICLE_PAGE = b"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Warranty terms - Example Shop</title>
<style>body { font-family: sans-serif }</style><script>var tracking = "do not index me";</script>
</head><body>
<header class="site"><a href="/">Example Shop</a> <span>Sign in</span></header>
<nav><ul><li><a href="/">Home</a></li><li><a href="/products">Products</a></li></ul></nav>
<main>
<article>
<header><h1>Warranty terms</h1><p class="byline">Updated in May</p></header>
<p>Every product carries a <b>two-year</b> warranty from the day of delivery.</p>
<h2>What is covered</h2>
<p>Defects in materials and workmanship.<br>Parts and labour.</p>
<h3>Claims</h3>
<ul><li>Write to support within 30 days.</li><li>Keep the receipt.</li></ul>
<table><tr><th>Product</th><th>Years</th></tr><tr><td>Kettle</td><td>2</td></tr></table>
</article>
<aside>Related: <a href="/returns">Returns policy</a></aside>
</main>
<footer class="site">Copyright Example Shop. Cookie settings.</footer>
</body></html>
"""


def bomb_pdf(*, inflated_bytes: int) -> bytes:
    """A one-page PDF of a few hundred KB whose content stream inflates to ``inflated_bytes``
    (blanks, then one line of text): a decompression bomb, written by hand."""
    import zlib

    text = b"BT /F1 12 Tf 72 720 Td (A page whose stream inflates far past its size) Tj ET\n"
    packer = zlib.compressobj(9)
    stream = packer.compress(b" " * inflated_bytes) + packer.compress(text) + packer.flush()
    return _hand_written_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ]
    )


def oversized_pdf(sizes: Sequence[tuple[int, int]], *, user_unit: int = 1) -> bytes:
    """One page per ``(width, height)`` in points, each with ``/UserUnit user_unit`` and a line of
    text halfway down, written by hand (fpdf2 keeps to sensible sizes): the largest
    MediaBox the spec allows is 14,400 points (5 m), a writer may set any."""
    pages = len(sizes)
    font = 3 + 2 * pages
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (b" ".join(b"%d 0 R" % (3 + 2 * index) for index in range(pages)), pages),
    ]
    for index, (width, height) in enumerate(sizes):
        text = b"BT /F1 12 Tf 72 %d Td (Page %d of a very large drawing, %d by %d points) Tj ET\n" % (
            height // 2,
            index + 1,
            width,
            height,
        )
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /UserUnit %d /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (width, height, user_unit, 4 + 2 * index, font)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(text) + text + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return _hand_written_pdf(objects)


def _hand_written_pdf(objects: Sequence[bytes]) -> bytes:
    """The objects numbered from 1 (the first the catalog), with their cross-reference table."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
