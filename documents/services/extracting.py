"""The job's first stage for an uploaded file: read its text, structure and pages from the original.

``document_extract`` runs ``documents.ingestion.extraction.extract_isolated`` (a child process
with a memory cap and a time limit) on the stored original, reporting each page to the job's
progress and heartbeat. A PDF's pages that are pictures (a scan) are read by OCR there too
(``ocr_options``: OPENFABLE_OCR, on wherever Tesseract is installed), each page recognised
reported as the job's "recognising" stage. Nothing is written here: the text and its page map are saved with the
new tree, in the tree swap (``documents.services.trees.document_tree_replace``), so a file that
cannot be read fails its job with one sentence and leaves the previous text and tree serving.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings

from documents.ingestion.extraction import ExtractionError, ExtractionLimits, OcrOptions
from documents.ingestion.extraction.isolated import extract_isolated
from documents.ingestion.extraction.ocr import tesseract_missing
from documents.models import FILE_FORMATS, Document
from openfable.errors import UserInputError

_MEGABYTE = 1024 * 1024


class DocumentExtractionError(UserInputError):
    """The file could not be read: the job fails with this message (a retry stays available)."""

    code = "extraction_failed"


@dataclass(frozen=True)
class ExtractedText:
    """A document's text as extracted from its file, with its page map ([[page, start, end], ...])
    and where the heading lines are whose level extraction guessed from a PDF's fonts."""

    text: str
    page_spans: list[list[int]]
    font_heading_starts: frozenset[int] = frozenset()
    # The pages read by OCR and the PDF of them with their text (``Document.text_layer``).
    recognised_pages: list[int] = field(default_factory=list)
    text_layer: bytes = b""


def document_needs_extraction(document: Document) -> bool:
    """A PDF, Word or HTML document: its text comes from its original file, read by the job."""
    return document.format in FILE_FORMATS and bool(document.original)


def extraction_limits() -> ExtractionLimits:
    return ExtractionLimits(
        max_pages=settings.MAX_PAGES,
        max_seconds=settings.EXTRACTION_SECONDS,
        # Characters, a bound the extractor can check as it goes; the stored text's own limit is
        # in bytes (OPENFABLE_MAX_DOCUMENT_BYTES), checked once it is read.
        max_text_chars=settings.MAX_DOCUMENT_BYTES,
    )


def ocr_options() -> tuple[OcrOptions | None, str]:
    """How this worker reads scanned pages: the options, or None and why not ("" when
    OPENFABLE_OCR=off, or Tesseract is not installed and OCR is "auto": a scan is then refused
    as it always was; a sentence when Tesseract lacks a language it was asked for)."""
    if settings.OCR == "off":
        return None, ""
    options = OcrOptions(languages=settings.OCR_LANGUAGES, seconds_per_page=settings.OCR_SECONDS_PER_PAGE)
    missing = tesseract_missing(options)
    if missing.startswith("Tesseract is not installed"):
        return None, ""
    return (None, missing) if missing else (options, "")


def document_extract(
    *,
    document: Document,
    on_progress: Callable[[int, int], None],
    on_recognise: Callable[[int, int], None] | None = None,
) -> ExtractedText:
    """The text and page map of ``document``'s original file; ``DocumentExtractionError`` says why not.

    ``on_progress(pages_read, pages)`` hears of every page (the job's progress and heartbeat),
    ``on_recognise(pages_done, pages)`` of every page read by OCR."""
    name = document_file_name(document)
    try:
        with document.original.open("rb") as file:
            data = file.read()
    except OSError as error:
        raise DocumentExtractionError(
            f"The original file of {name} is missing from storage ({type(error).__name__}); "
            "upload the file again."
        ) from None
    ocr, ocr_unavailable = ocr_options()
    try:
        extracted = extract_isolated(
            data,
            filename=name,
            limits=extraction_limits(),
            max_memory_bytes=settings.EXTRACTION_MEMORY_MB * _MEGABYTE,
            on_progress=on_progress,
            ocr=ocr,
            on_recognise=on_recognise,
        )
    except ExtractionError as error:
        if error.code == "no_text_layer" and ocr_unavailable:
            # OCR was asked for and could not run: say what to install, not only "run OCR".
            raise DocumentExtractionError(
                f"{error.message}. OCR is on (OPENFABLE_OCR) but cannot run here: {ocr_unavailable}.",
                code=error.code,
            ) from None
        raise DocumentExtractionError(f"{error.message}.", code=error.code) from None
    size = len(extracted.text.encode("utf-8"))
    if size > settings.MAX_DOCUMENT_BYTES:
        raise DocumentExtractionError(
            f"The text of {name} is {size:,} bytes; a document's text may have at most "
            f"{settings.MAX_DOCUMENT_BYTES:,} (OPENFABLE_MAX_DOCUMENT_BYTES). Split the file and "
            "upload the parts.",
            code="too_large",
        )
    return ExtractedText(
        text=extracted.text,
        page_spans=[[span.page, span.start, span.end] for span in extracted.page_spans],
        font_heading_starts=frozenset(hint.start for hint in extracted.headings if hint.source == "font"),
        recognised_pages=list(extracted.recognised_pages),
        text_layer=extracted.text_layer,
    )


def document_file_name(document: Document) -> str:
    """How the file is named in a sentence: the name it was uploaded under."""
    name = (document.source_filename or document.original.name or "").replace("\\", "/").rsplit("/", 1)[-1]
    return name or "the file"
