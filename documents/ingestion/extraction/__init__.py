"""Real documents in: the text, structure and pages of a PDF, Word, HTML, Markdown or text file.

``extract(data, filename=..., limits=...)`` is the one entry point (pure, no Django): it detects
the format from the content (``detect``), reads it (``pdf_pdfium`` + ``pdf_layout`` +
``pdf_clean`` for PDF, ``docx``, ``html``; Markdown and text pass through unchanged) and returns
an ``Extracted``: the cleaned text with its structure written as markdown headings (which the
structural builder reads as sections), the heading hints, and the page map. Anything it cannot
read raises ``ExtractionError`` with one sentence saying what to do.

``isolated.extract_isolated`` is the same call in a child process with a memory cap and a hard
time limit: what a worker runs on an uploaded file, since PDFium's own work (a decompression
bomb, a page that loops) is beyond the checks ``extract`` makes between pages.
"""

from __future__ import annotations

import codecs

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
    PageSpan,
    Progress,
)

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
    "PageSpan",
    "Progress",
    "clean_chars",
    "clean_line",
    "detect_format",
    "extract",
    "format_from_name",
]

# Fewer characters than this a page on average: the pages are pictures (a scan), not text.
_MIN_CHARS_PER_PAGE = 16


def extract(
    data: bytes,
    *,
    filename: str,
    limits: ExtractionLimits | None = None,
    on_progress: Progress | None = None,
    use_outline: bool = True,
) -> Extracted:
    """The document in ``data`` (the file's bytes; ``filename`` breaks ties and names it in errors).

    ``on_progress(done, total)`` hears of each page read (a PDF), or of the one "page" of the
    other formats once it is read. ``use_outline=False`` reads a PDF as if it had no bookmarks:
    the structure benchmark scores headings against a PDF's own outline, which the reader must
    then not have seen."""
    limits = limits or ExtractionLimits()
    progress: Progress = on_progress or (lambda done, total: None)
    detected = detect_format(data, filename=filename)
    deadline = Deadline(limits.max_seconds, filename)
    if detected.format in (MARKDOWN, TEXT):
        extracted = _text(data, filename, detected, limits)
        progress(1, 1)
        return extracted
    pages = 0  # an HTML page has no pages; a Word file only where it says where they break
    if detected.format == PDF:
        blocks, pages = _pdf_blocks(data, filename, limits, deadline, progress, use_outline=use_outline)
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
    )


def _pdf_blocks(
    data: bytes,
    filename: str,
    limits: ExtractionLimits,
    deadline: Deadline,
    progress: Progress,
    *,
    use_outline: bool,
) -> tuple[list[Block], int]:
    from documents.ingestion.extraction.pdf_clean import clean_pages
    from documents.ingestion.extraction.pdf_pdfium import read_pdf

    layout = read_pdf(data, filename=filename, limits=limits, deadline=deadline, on_page=progress)
    pages = len(layout.pages)
    if sum(page.ink_chars for page in layout.pages) < _MIN_CHARS_PER_PAGE * pages:
        raise ExtractionError(
            f"{filename} has no text layer (a scanned PDF?): its pages are images. Run it through "
            "OCR (for example ocrmypdf) and upload the result",
            code="no_text_layer",
        )
    return clean_pages(layout.pages, layout.outline if use_outline else []), pages


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
