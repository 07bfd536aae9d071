"""Scanned pages read by OCR (OCRmyPDF driving the real Tesseract): an image-only PDF, a scanned
page inside a typed PDF, the refusal when OCR is off or finds nothing, and the time it is given."""

from __future__ import annotations

import re

import pypdfium2 as pdfium
import pytest

from documents.ingestion.extraction import ExtractionError, ExtractionLimits, OcrOptions, extract
from documents.ingestion.extraction.isolated import extract_isolated
from documents.ingestion.extraction.ocr import installed_languages, tesseract_missing
from tests.documents.ingestion import document_files as files
from tests.documents.ingestion.scans import (
    SCANNED_PAGES,
    TYPED_PAGE,
    mixed_pdf,
    require_tesseract,
    scanned_pdf,
)

OCR = OcrOptions(languages=("eng",), seconds_per_page=60.0)


@pytest.fixture(autouse=True)
def _tesseract() -> None:
    require_tesseract()


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def _found(line: str, text: str) -> bool:
    """Every word of ``line`` in ``text``, in order (OCR may join or split a space, not a word)."""
    return " ".join(_words(line)) in " ".join(_words(text))


def test_an_image_only_pdf_is_read_by_ocr_page_by_page() -> None:
    heard: list[tuple[int, int]] = []
    extracted = extract(scanned_pdf(), filename="scan.pdf", ocr=OCR, on_recognise=lambda *p: heard.append(p))
    assert extracted.recognised_pages == (1, 2, 3)
    assert [span.page for span in extracted.page_spans] == [1, 2, 3]
    for span, lines in zip(extracted.page_spans, SCANNED_PAGES, strict=True):
        page_text = extracted.text[span.start : span.end]
        assert all(_found(line, page_text) for line in lines), (lines, page_text)
    assert heard == [(0, 3), (1, 3), (2, 3), (3, 3)]
    # The text layer: the three pages with their text, and without the scans' pictures.
    layer = pdfium.PdfDocument(extracted.text_layer)
    assert len(layer) == 3 and pdfium.PdfDocument(scanned_pdf())[0].get_size() == layer[0].get_size()
    assert len(extracted.text_layer) < len(scanned_pdf()) / 5


def test_a_scanned_page_inside_a_typed_pdf_is_read_and_the_typed_one_is_not() -> None:
    extracted = extract(mixed_pdf(), filename="letter.pdf", ocr=OCR)
    assert extracted.recognised_pages == (2,)
    first, second = (extracted.text[span.start : span.end] for span in extracted.page_spans)
    assert all(line in first for line in TYPED_PAGE)  # the typed text, exactly as typed
    assert all(_found(line, second) for line in SCANNED_PAGES[0]), second
    assert len(pdfium.PdfDocument(extracted.text_layer)) == 1


def test_a_typed_pdf_never_goes_near_ocr() -> None:
    extracted = extract(files.report_pdf(pages=2), filename="report.pdf", ocr=OCR)
    assert extracted.recognised_pages == () and extracted.text_layer == b""


def test_without_ocr_a_scan_is_refused_as_before() -> None:
    with pytest.raises(
        ExtractionError, match=r"has no text layer \(a scanned PDF\?\).*Run it through OCR"
    ) as error:
        extract(scanned_pdf(), filename="scan.pdf")
    assert error.value.code == "no_text_layer"


def test_pictures_without_text_are_refused_after_ocr_too() -> None:
    with pytest.raises(ExtractionError, match=r"OCR \(Tesseract, languages eng\) found no text") as error:
        extract(files.image_only_pdf(), filename="bars.pdf", ocr=OCR)
    assert error.value.code == "no_text_layer"


@pytest.mark.slow
def test_the_isolated_reader_gets_more_time_for_each_page_to_ocr() -> None:
    """Half a second is enough to read a typed file, not to OCR three pages: the child asks for
    OCR's time once it knows how many pages need it, and gets it."""
    heard: list[tuple[int, int]] = []
    extracted = extract_isolated(
        scanned_pdf(),
        filename="scan.pdf",
        limits=ExtractionLimits(max_seconds=0.5),
        ocr=OCR,
        on_recognise=lambda *pages: heard.append(pages),
    )
    assert extracted.recognised_pages == (1, 2, 3) and heard[-1] == (3, 3)
    assert _found(SCANNED_PAGES[2][2], extracted.text)


def test_a_missing_language_is_named_with_its_package() -> None:
    assert "eng" in (installed_languages() or frozenset())
    assert tesseract_missing(OCR) == ""
    missing = tesseract_missing(OcrOptions(languages=("eng", "xqz")))
    assert "Tesseract has no xqz language data (apt-get install tesseract-ocr-xqz)" in missing


def test_the_isolated_reader_reads_a_scan_with_no_one_listening_to_its_pages() -> None:
    extracted = extract_isolated(scanned_pdf(SCANNED_PAGES[:1]), filename="scan.pdf", ocr=OCR)
    assert extracted.recognised_pages == (1,) and _found(SCANNED_PAGES[0][0], extracted.text)
