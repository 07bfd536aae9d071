"""Text for the pages of a PDF that are pictures (a scan): OCR through OCRmyPDF and Tesseract.
Pure, no Django.

``recognise_pages`` copies the pages that need it into a PDF of their own (PDFium), has OCRmyPDF
give them a text layer (Tesseract reads each page's picture; OCRmyPDF places every word as
invisible text over the very spot it was read from), and returns that PDF. Its pages keep the
original pages' size and content, so the text PDFium reads from it, and the boxes of its
characters, line up with the original page's picture: extraction reads these pages from it, and
the document page finds a passage's lines on it (``pdf_pages.text_boxes``), while the original
file stays as uploaded.

OCRmyPDF runs in the process that calls it, as extraction does: in the worker's child process
with a memory cap and a time limit (``isolated``); Tesseract, its own child, inherits the cap.
Its "OCR" progress bar (one per run, a page at a time) is what ``on_page`` hears.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import logging
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pluggy

from documents.ingestion.extraction.model import ExtractionError, OcrOptions, Progress

logger = logging.getLogger(__name__)

# OCRmyPDF's plugin marker, made here so that this module is its own plugin (the progress bar
# below) without importing OCRmyPDF until pages are to be read.
_hookimpl = pluggy.HookimplMarker("ocrmypdf")
# Who hears of each page of the run in progress (one run at a time in a process: extraction
# runs one file per child process).
_listener: Progress | None = None
_LIST_LANGUAGES_SECONDS = 20.0


def tesseract_missing(options: OcrOptions) -> str:
    """ "" when OCR can run with ``options``; else a sentence saying what is missing (Tesseract,
    one of its languages, or OCRmyPDF) and how to install it."""
    installed = installed_languages()
    if installed is None:
        return "Tesseract is not installed (apt-get install tesseract-ocr tesseract-ocr-eng)"
    missing = [language for language in options.languages if language not in installed]
    if missing:
        packages = " ".join(f"tesseract-ocr-{language.lower().replace('_', '-')}" for language in missing)
        return (
            f"Tesseract has no {', '.join(missing)} language data (apt-get install {packages}), or "
            "set OPENFABLE_OCR_LANGUAGES to languages it has: "
            f"{', '.join(sorted(installed)) or 'none'}"
        )
    if importlib.util.find_spec("ocrmypdf") is None:
        return "OCRmyPDF is not installed (pip install ocrmypdf)"
    return ""


@functools.cache
def installed_languages() -> frozenset[str] | None:
    """The languages Tesseract can read here (``tesseract --list-langs``), None without Tesseract.
    Asked once a process: installing a language means restarting the worker."""
    tesseract = shutil.which("tesseract")
    if tesseract is None:
        return None
    try:
        listed = subprocess.run(
            [tesseract, "--list-langs"],
            capture_output=True,
            text=True,
            timeout=_LIST_LANGUAGES_SECONDS,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as error:
        logger.warning("tesseract --list-langs failed: %s", error)
        return None
    # The first line is a header ("List of available languages in ...").
    lines = [line.strip() for line in listed.stdout.splitlines()[1:]]
    return frozenset(line for line in lines if line and line != "osd")


def recognise_pages(
    data: bytes,
    pages: Sequence[int],
    *,
    options: OcrOptions,
    filename: str,
    on_page: Progress | None = None,
) -> bytes:
    """A PDF of the pages ``pages`` (0-based, in order) of the PDF ``data``, with a text layer
    recognised by Tesseract over each page's picture. ``on_page(done, len(pages))`` hears of
    each page recognised, and of (0, total) as it begins. ``ExtractionError`` when OCRmyPDF cannot read them."""
    import ocrmypdf
    import pypdfium2 as pdfium

    global _listener
    with tempfile.TemporaryDirectory(prefix="openfable-ocr-") as folder:
        scanned, recognised = Path(folder) / "scanned.pdf", Path(folder) / "recognised.pdf"
        source, part = pdfium.PdfDocument(data), pdfium.PdfDocument.new()
        try:
            part.import_pages(source, list(pages))
            part.save(scanned)
        finally:
            part.close()
            source.close()
        _listener = on_page
        try:
            ocrmypdf.ocr(
                scanned,
                recognised,
                language=list(options.languages),
                # "redo": the few letters a page already has stay as they are, the picture's
                # text is read around them (a scan with a typed page number).
                mode="redo",
                # A plain PDF, as fast as it can be made: no PDF/A conversion (Ghostscript), no
                # image optimisation, no linearising; the file is only ever read by PDFium here.
                output_type="pdf",
                optimize=0,
                fast_web_view=1_000_000,
                rasterizer="pypdfium",
                # One page at a time, in threads of this process: the worker's cores are shared
                # with the other jobs, and the memory cap is this process's.
                jobs=1,
                use_threads=True,
                tesseract_timeout=options.seconds_per_page,
                progress_bar=True,
                plugins=[__name__],
            )
        except ocrmypdf.exceptions.ExitCodeException as error:
            raise ExtractionError(
                f"{filename}: OCR could not read its scanned pages ({type(error).__name__}: "
                f"{str(error).strip()[:200] or 'no detail'}); save or export it again and upload it again",
                code="ocr_failed",
            ) from None
        finally:
            _listener = None
        return _without_pictures(recognised.read_bytes())


def _without_pictures(layer: bytes) -> bytes:
    """``layer`` without the pictures drawn on its pages themselves: the page's text and its
    boxes are all it is read for (the original file is what is shown), and a scan's pictures
    are nearly all of its bytes. Kept whole when removing them changes any page's text (PDFium
    writes the page's content anew), or fails."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as pdfium_c

    def texts(document: pdfium.PdfDocument) -> list[str]:
        out = []
        for page in document:
            textpage = page.get_textpage()
            out.append(textpage.get_text_range())
            textpage.close()
            page.close()
        return out

    try:
        document = pdfium.PdfDocument(layer)
        try:
            before = texts(document)
            for page in document:
                pictures = list(page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=1))
                for picture in pictures:
                    page.remove_obj(picture)
                if pictures:
                    page.gen_content()
                page.close()
            out = io.BytesIO()
            document.save(out)
        finally:
            document.close()
        smaller = out.getvalue()
        check = pdfium.PdfDocument(smaller)
        try:
            same = texts(check) == before
        finally:
            check.close()
    except pdfium.PdfiumError as error:
        logger.warning("the recognised pages keep their pictures: %s", error)
        return layer
    return smaller if same else layer


class _PageProgress:
    """OCRmyPDF's progress bar protocol (``ocrmypdf.pluginspec.ProgressBar``): the "OCR" bar
    counts pages, each in halves (read, then placed); the whole pages go to the listener."""

    def __init__(self, *, total: float | None = None, desc: str | None = None, **_: Any) -> None:
        self.pages = int(total or 0) if desc == "OCR" else 0
        self.done = 0.0
        self.told = 0

    def __enter__(self) -> _PageProgress:
        if self.pages and _listener is not None:
            _listener(0, self.pages)  # the stage begins before its first page, seconds away
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def update(self, n: float = 1, *, completed: float | None = None) -> None:
        if not self.pages or _listener is None:
            return
        self.done = completed if completed is not None else self.done + n
        whole = min(self.pages, int(self.done))
        if whole > self.told:
            self.told = whole
            _listener(whole, self.pages)


@_hookimpl
def get_progressbar_class() -> type[_PageProgress]:
    return _PageProgress
