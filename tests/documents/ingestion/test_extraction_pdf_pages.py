"""Drawing a PDF page (``pdf_pages``): the bitmap's size bounded before drawing, the child's memory
cap and time limit (``isolated.run_isolated``, as extraction), each failure a sentence."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from documents.ingestion.extraction.pdf_pages import (
    MAX_PIXELS,
    RenderError,
    drawing_scale,
    render_page_png_isolated,
)
from tests.documents.ingestion import document_files as files

_MEGABYTE = 1024 * 1024


def test_an_ordinary_page_is_drawn_at_the_scale_asked() -> None:
    assert drawing_scale(595, 842, scale=1.5) == 1.5  # A4
    assert drawing_scale(2384, 3370, scale=1.5) == 1.5  # A0: 18 million pixels


def test_a_larger_page_is_drawn_smaller_to_fit_the_pixel_budget() -> None:
    scale = drawing_scale(14_400, 14_400, scale=1.5)
    assert scale == pytest.approx(0.3105, abs=1e-4)
    assert (14_400 * scale) ** 2 == pytest.approx(MAX_PIXELS)


def test_a_page_that_would_fit_only_unreadably_small_is_refused() -> None:
    with pytest.raises(
        RenderError, match=r"^the page is 352\.8 m x 352\.8 m \(1,000,000 x 1,000,000 points\)"
    ):
        drawing_scale(1_000_000, 1_000_000, scale=1.5)
    with pytest.raises(RenderError, match=r"too large to draw"):
        drawing_scale(10**9, 10, scale=1.5)  # a strip: small in area, not in length
    assert drawing_scale(0, 0, scale=1.5) == 1.5  # a degenerate box is PDFium's to refuse


def test_a_huge_page_is_drawn_in_a_child_within_the_pixel_budget() -> None:
    png = render_page_png_isolated(
        files.oversized_pdf([(14_400, 14_400)], user_unit=75_000),
        1,
        scale=1.5,
        max_memory_bytes=512 * _MEGABYTE,
        max_seconds=30,
    )
    width, height = Image.open(io.BytesIO(png)).size
    assert width == height and width * height <= MAX_PIXELS * 1.001  # PDFium rounds up


def test_a_drawing_past_its_memory_is_stopped() -> None:
    with pytest.raises(RenderError, match=r"^drawing it needs more than the 8 MB of memory allowed$"):
        render_page_png_isolated(
            files.oversized_pdf([(14_400, 14_400)]),
            1,
            scale=1.5,
            max_memory_bytes=8 * _MEGABYTE,
            max_seconds=30,
        )


def test_a_drawing_past_its_time_is_killed() -> None:
    with pytest.raises(RenderError, match=r"^drawing it took longer than 0\.001 seconds$"):
        render_page_png_isolated(
            files.report_pdf(pages=1), 1, scale=1.5, max_memory_bytes=512 * _MEGABYTE, max_seconds=0.001
        )


def test_a_damaged_file_is_a_sentence() -> None:
    with pytest.raises(RenderError, match=r"^the page is damaged \(PdfiumError\)$"):
        render_page_png_isolated(
            b"%PDF-1.7\nnot a pdf", 1, scale=1.5, max_memory_bytes=512 * _MEGABYTE, max_seconds=30
        )
