"""Scanned pages made in the test: text drawn into a picture with Pillow, saved as a PDF page with
no text layer (what a scanner writes), and a PDF with a typed page beside a scanned one.

Each page's lines are known with their place on the picture, so a test can check that OCR found
them and that their boxes land where they were drawn. Tesseract must be installed
(``require_tesseract``): ``make test`` installs it (scripts/system-deps.sh), so a machine without
it fails these tests instead of skipping them.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Sequence

import pytest
from PIL import Image, ImageDraw, ImageFont

from tests.documents.ingestion.document_files import draw_lines, pdf_document

# A Letter page scanned at 200 dots per inch.
DPI = 200
WIDTH, HEIGHT = 1700, 2200
LEFT, TOP, PITCH, FONT_PX = 150, 200, 70, 40

SCANNED_PAGES = (
    (
        "Apricot harvest report",
        "The quarterly harvest of apricots rose by eleven",
        "percent in Valencia, helped by a mild spring.",
    ),
    (
        "Irrigation and costs",
        "Farmers spent less on irrigation because the",
        "reservoirs stayed full through the summer months.",
    ),
    (
        "Outlook for next year",
        "Growers expect prices to settle once the new",
        "packing plant near Alicante opens in March.",
    ),
)
TYPED_PAGE = (
    "Typed cover letter from the cooperative board",
    "This page was written on a computer and has a text layer.",
    "The scanned page after it holds the survey of the orchards.",
)


def require_tesseract() -> None:
    if shutil.which("tesseract") is None:
        pytest.fail(
            "tesseract is missing: `make test` installs Debian's tesseract-ocr (scripts/system-deps.sh)"
        )


def page_picture(lines: Sequence[str]) -> Image.Image:
    """A white page with ``lines`` drawn in black, from (LEFT, TOP), PITCH pixels apart."""
    picture = Image.new("L", (WIDTH, HEIGHT), 255)
    draw = ImageDraw.Draw(picture)
    font = ImageFont.load_default(size=FONT_PX)
    for row, line in enumerate(lines):
        draw.text((LEFT, TOP + row * PITCH), line, fill=0, font=font)
    return picture


def line_top(row: int) -> float:
    """Where line ``row`` of a scanned page starts, as a fraction of the page's height."""
    return (TOP + row * PITCH) / HEIGHT


def scanned_pdf(pages: Sequence[Sequence[str]] = SCANNED_PAGES) -> bytes:
    """A PDF whose every page is a picture: no characters at all, only images."""
    pictures = [page_picture(lines) for lines in pages]
    out = io.BytesIO()
    pictures[0].save(out, format="PDF", save_all=True, append_images=pictures[1:], resolution=float(DPI))
    return out.getvalue()


def mixed_pdf() -> bytes:
    """Page 1 typed (a text layer), page 2 a scanned picture of ``SCANNED_PAGES[0]``."""
    pdf = pdf_document()
    pdf.set_font("Helvetica", "", 11)
    pdf.add_page(format=(612, 792))
    draw_lines(pdf, TYPED_PAGE)
    pdf.add_page(format=(612, 792))
    pdf.image(page_picture(SCANNED_PAGES[0]), x=0, y=0, w=612, h=792)
    return bytes(pdf.output())
