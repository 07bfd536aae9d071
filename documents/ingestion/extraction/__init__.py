"""Real documents in: the text, structure and pages of a PDF, Word, HTML, Markdown or text file.

``extract(data, filename=..., limits=...)`` is the one entry point (pure, no Django): it detects
the format from the content (``detect``), reads it (``pdf_pdfium`` + ``pdf_layout`` +
``pdf_clean`` for PDF, ``docx``, ``html``; Markdown and text pass through unchanged) and returns
an ``Extracted``: the cleaned text with its structure written as markdown headings (which the
structural builder reads as sections), the heading hints, and the page map. Anything it cannot
read raises ``ExtractionError`` with one sentence saying what to do.

A PDF's pages that are pictures (a scan, or scanned pages inside a text PDF) are read by OCR
when ``ocr`` is given (``ocr.recognise_pages``: OCRmyPDF and Tesseract); without it, a PDF that
is only pictures is refused with a sentence saying to run it through OCR first.

``isolated.extract_isolated`` is the same call in a child process with a memory cap and a hard
time limit: what a worker runs on an uploaded file, since PDFium's own work (a decompression
bomb, a page that loops) is beyond the checks ``extract`` makes between pages.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from documents.ingestion.extraction.assemble import Block, assemble, clean_chars, clean_line
from documents.ingestion.extraction.detect import Detected, detect_format, format_from_name
from documents.ingestion.extraction.model import (
    DOCX,
    FORMATS,
    HTML,
    MARKDOWN,
    PDF,
    TEXT,
    Deadline,
    Extracted,
    ExtractionError,
    ExtractionLimits,
    HeadingHint,
    OcrOptions,
    PageSpan,
    Progress,
)

if TYPE_CHECKING:
    from documents.ingestion.extraction.pdf_layout import PdfPage

__all__ = [
    "DOCX",
    "FORMATS",
    "HTML",
    "MARKDOWN",
    "PDF",
    "TEXT",
    "Detected",
    "Extracted",
    "ExtractionError",
    "ExtractionLimits",
    "HeadingHint",
    "OcrOptions",
    "PageSpan",
    "Progress",
    "clean_chars",
    "clean_line",
    "detect_format",
    "extract",
    "format_from_name",
]

# Fewer characters than this a page on average: the pages are pictures (a scan), not text. A
# page with fewer than this that draws anything at all is read by OCR (when it is on): a page
# number typed on a scan is not its text.
_MIN_CHARS_PER_PAGE = 16


def extract(
    data: bytes,
    *,
    filename: str,
    limits: ExtractionLimits | None = None,
    on_progress: Progress | None = None,
    use_outline: bool = True,
    ocr: OcrOptions | None = None,
    on_recognise: Progress | None = None,
    on_more_time: Callable[[float], None] | None = None,
) -> Extracted:
    """The document in ``data`` (the file's bytes; ``filename`` breaks ties and names it in errors).

    ``on_progress(done, total)`` hears of each page read (a PDF), or of the one "page" of the
    other formats once it is read. ``use_outline=False`` reads a PDF as if it had no bookmarks:
    the structure benchmark scores headings against a PDF's own outline, which the reader must
    then not have seen.

    ``ocr``: read a PDF's pages that are pictures by OCR; ``on_recognise(done, total)`` hears of
    each such page recognised, and ``on_more_time(seconds)`` of the time added to the limit for
    them first (``ocr.seconds_per_page`` a page), so that a caller timing the reading (the
    isolated child's parent) can allow it too."""
    limits = limits or ExtractionLimits()
    progress: Progress = on_progress or (lambda done, total: None)
    detected = detect_format(data, filename=filename)
    deadline = Deadline(limits.max_seconds, filename)
    if detected.format in (MARKDOWN, TEXT):
        extracted = _text(data, filename, detected, limits)
        progress(1, 1)
        return extracted
    pages = 0  # an HTML page has no pages; a Word file only where it says where they break
    recognised: _Recognised = _Recognised()
    if detected.format == PDF:
        blocks, pages, recognised = _pdf_blocks(
            data,
            filename,
            limits,
            deadline,
            progress,
            use_outline=use_outline,
            ocr=_OcrRun(ocr, on_recognise, on_more_time) if ocr is not None else None,
        )
    elif detected.format == DOCX:
        from documents.ingestion.extraction.docx import docx_blocks

        blocks, pages = docx_blocks(data, filename=filename, limits=limits, deadline=deadline)
    else:
        from documents.ingestion.extraction.html import html_blocks

        blocks = html_blocks(data, deadline=deadline)
    if detected.format != PDF:
        progress(1, 1)
    assembled = assemble(blocks, pages=pages, max_chars=limits.max_text_chars, filename=filename)
    if not assembled.text.strip():
        raise ExtractionError(f"{filename} holds no text; upload a file with some text in it", code="empty")
    return Extracted(
        text=assembled.text,
        format=detected.format,
        pages=pages,
        page_spans=assembled.page_spans,
        headings=assembled.headings,
        mismatch=detected.mismatch,
        recognised_pages=recognised.pages,
        text_layer=recognised.text_layer,
    )


@dataclass(frozen=True)
class _OcrRun:
    options: OcrOptions
    on_page: Progress | None
    on_more_time: Callable[[float], None] | None


@dataclass(frozen=True)
class _Recognised:
    """The pages (1-based) read by OCR, and the PDF of them with their text (``Extracted``)."""

    pages: tuple[int, ...] = ()
    text_layer: bytes = b""


def _pdf_blocks(
    data: bytes,
    filename: str,
    limits: ExtractionLimits,
    deadline: Deadline,
    progress: Progress,
    *,
    use_outline: bool,
    ocr: _OcrRun | None,
) -> tuple[list[Block], int, _Recognised]:
    from documents.ingestion.extraction.pdf_clean import clean_pages
    from documents.ingestion.extraction.pdf_pdfium import read_pdf

    layout = read_pdf(data, filename=filename, limits=limits, deadline=deadline, on_page=progress)
    pages = len(layout.pages)
    recognised = _Recognised()
    scanned = _scanned_pages(layout.pages)
    if ocr is not None and scanned:
        recognised = _recognise(data, scanned, ocr, filename=filename, limits=limits, deadline=deadline)
        _replace_scanned(
            layout.pages, scanned, recognised, filename=filename, limits=limits, deadline=deadline
        )
    if sum(page.ink_chars for page in layout.pages) < _MIN_CHARS_PER_PAGE * pages:
        raise _no_text_layer(filename, recognised, ocr)
    return clean_pages(layout.pages, layout.outline if use_outline else []), pages, recognised


def _scanned_pages(pages: list[PdfPage]) -> list[int]:
    """The pages (0-based) with (almost) no characters that draw something: pictures of pages."""
    return [
        index for index, page in enumerate(pages) if page.ink_chars < _MIN_CHARS_PER_PAGE and not page.blank
    ]


def _replace_scanned(
    pages: list[PdfPage],
    scanned: list[int],
    recognised: _Recognised,
    *,
    filename: str,
    limits: ExtractionLimits,
    deadline: Deadline,
) -> None:
    """Each of the ``scanned`` pages replaced, in place, by its page of the OCR's text layer."""
    from documents.ingestion.extraction.pdf_pdfium import read_pdf

    text_pages = read_pdf(recognised.text_layer, filename=filename, limits=limits, deadline=deadline).pages
    if len(text_pages) != len(scanned):  # OCRmyPDF keeps every page it is given
        raise ExtractionError(
            f"{filename}: OCR returned {len(text_pages)} pages for {len(scanned)}; "
            "save or export it again and upload it again",
            code="ocr_failed",
        )
    for index, page in zip(scanned, text_pages, strict=True):
        pages[index] = page


def _no_text_layer(filename: str, recognised: _Recognised, ocr: _OcrRun | None) -> ExtractionError:
    """The error for a PDF whose pages hold too few characters: after OCR, that it found none
    either; without, that the file needs it."""
    if recognised.pages:
        languages = "+".join(ocr.options.languages) if ocr is not None else ""
        return ExtractionError(
            f"{filename} has no text layer (a scanned PDF?), and OCR (Tesseract, languages "
            f"{languages}) found no text on its pages either. Upload a clearer scan, or a file "
            "with a text layer",
            code="no_text_layer",
        )
    return ExtractionError(
        f"{filename} has no text layer (a scanned PDF?): its pages are images. Run it through "
        "OCR (for example ocrmypdf) and upload the result",
        code="no_text_layer",
    )


def _recognise(
    data: bytes,
    scanned: list[int],
    ocr: _OcrRun,
    *,
    filename: str,
    limits: ExtractionLimits,
    deadline: Deadline,
) -> _Recognised:
    """OCR of the pages ``scanned`` (0-based), with the time limit raised for them first: a
    page takes Tesseract seconds where reading a text page takes milliseconds."""
    from documents.ingestion.extraction.ocr import recognise_pages

    more = ocr.options.seconds_per_page * len(scanned)
    if ocr.on_more_time is not None:
        ocr.on_more_time(more)
    deadline.extend(more)
    text_layer = recognise_pages(data, scanned, options=ocr.options, filename=filename, on_page=ocr.on_page)
    deadline.check()
    return _Recognised(pages=tuple(index + 1 for index in scanned), text_layer=text_layer)


def _text(data: bytes, filename: str, detected: Detected, limits: ExtractionLimits) -> Extracted:
    """Markdown and plain text are stored as they are: the structural builder reads their headings."""
    try:
        text = data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ExtractionError(
            f"{filename} is not UTF-8 text (byte {error.start}); save it as UTF-8, or upload it as "
            "PDF, Word (.docx) or HTML",
            code="not_utf8",
        ) from None
    if not text.strip():
        raise ExtractionError(f"{filename} holds no text; upload a file with some text in it", code="empty")
    if len(text) > limits.max_text_chars:
        raise ExtractionError(
            f"{filename} has more than {limits.max_text_chars:,} characters; split it and upload the parts",
            code="too_large",
        )
    return Extracted(
        text=text,
        format=detected.format,
        pages=1,
        page_spans=(PageSpan(1, 0, len(text)),),
        mismatch=detected.mismatch,
    )
