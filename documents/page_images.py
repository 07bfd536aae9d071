"""A PDF document's pages beside a selected node: the pictures, drawn on the server and kept on
disk (``OPENFABLE_PAGE_IMAGES_DIR``, default DATA_DIR/page-images), and the node's lines on them.

The document page shows them (``web.views``); whoever asks has already been allowed to see
the document. Nothing here writes to the database.

A page is drawn in a child process with its own memory cap and time limit
(``OPENFABLE_RENDER_MEMORY_MB``, ``OPENFABLE_RENDER_SECONDS``), at a scale that bounds its bitmap,
at most ``OPENFABLE_RENDER_CONCURRENCY`` at once in a process, and once: the picture is kept, and
so is a failure (``<page>.failed`` beside it), so asking again costs nothing.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from documents.ingestion.extraction.pdf_pages import Box, RenderError, render_page_png_isolated, text_boxes
from documents.models import Document
from openfable.errors import NotFoundError, ServiceUnavailableError, UserInputError

# Pixels per PDF point: an A4 page is 893 x 1263 pixels, sharp enough to read beside the text.
RENDER_SCALE = 1.5
# A node over many pages shows its first few (a section of a long report spans dozens).
PAGES_SHOWN = 3
_MEGABYTE = 1024 * 1024
# How long a request waits for a drawing slot (or for another request drawing the same page)
# before it answers 503: a browser shows the missing picture at once instead of hanging.
SLOT_WAIT_SECONDS = 2.0
RETRY_AFTER_SECONDS = 5

# The pages this process is drawing now, each with the event set when it is done.
_in_flight_lock = threading.Lock()
_in_flight: dict[Path, threading.Event] = {}


class PageImageError(UserInputError):
    """The page could not be drawn; the text beside it still shows the node."""

    status = 422
    code = "page_not_drawn"


class PagesBusyError(ServiceUnavailableError):
    """Every drawing slot of this process stayed busy: try again in a moment."""

    code = "pages_busy"


@dataclass(frozen=True)
class PageView:
    page: int
    boxes: list[Box]  # the node's lines on the page, as fractions of it ([]: not found)


def node_page_views(*, document: Document, start: int, end: int) -> list[PageView]:
    """The first pages of a PDF document that ``content[start:end]`` lies on, each with the
    boxes of that text on it; [] for any other document."""
    if document.format != Document.Format.PDF or not document.original or not document.page_spans:
        return []
    spans = {page: (page_start, page_end) for page, page_start, page_end in document.page_spans}
    pages = document.pages_of(start, end)[:PAGES_SHOWN]
    # A page read by OCR has its text in the text layer, in the same place as on the page's
    # picture; the original has none there.
    recognised = {page: index for index, page in enumerate(document.recognised_pages or [])}
    views = []
    with _pdf(_source(document)) as pdf, _pdf(_layer_source(document, pages, recognised)) as layer:
        for number in pages:
            page_start, page_end = spans[number]
            part_start, part_end = max(start, page_start), min(end, page_end)
            page = (
                layer[recognised[number]] if layer is not None and number in recognised else pdf[number - 1]
            )
            try:
                boxes = text_boxes(
                    page,
                    document.content[part_start:part_end],
                    from_top=part_start <= page_start,
                    to_bottom=part_end >= page_end,
                )
            finally:
                page.close()
            views.append(PageView(page=number, boxes=boxes))
    return views


def page_image_path(*, document: Document, page: int) -> Path:
    """The PNG of page ``page`` of the document's PDF, drawn once and then read from disk.

    ``PageImageError`` (422) when it cannot be drawn, at once when it failed before;
    ``PagesBusyError`` (503) when no drawing slot frees within ``SLOT_WAIT_SECONDS``."""
    if document.format != Document.Format.PDF or not document.original:
        raise NotFoundError(f"Document {document.pk} is not a PDF: it has no page images.")
    if not any(span[0] == page for span in document.page_spans):
        raise NotFoundError(
            f"Document {document.pk} has no page {page}; its pages are 1 to {len(document.page_spans)}."
        )
    path = _folder(document) / f"{page}.png"
    deadline = time.monotonic() + SLOT_WAIT_SECONDS
    while True:
        if path.exists():
            return path
        _raise_if_failed_before(path)
        with _in_flight_lock:
            drawing = _in_flight.get(path)
            if drawing is None:
                drawing = _in_flight[path] = threading.Event()
                break
        # Another request of this process is drawing this page: its picture (or its failure) is
        # this one's answer too, so six tabs asking for one page draw it once.
        if not drawing.wait(_left(deadline)):
            raise _busy()
    try:
        _draw(document, page, path, deadline=deadline)
    finally:
        with _in_flight_lock:
            del _in_flight[path]
        drawing.set()
    return path


def page_images_delete(document_ids: list[int]) -> None:
    """Forget the drawn pages of these documents (deleted ones)."""
    root = Path(settings.PAGE_IMAGES_DIR)
    for document_id in document_ids:
        for folder in root.glob(f"{int(document_id)}-*"):
            shutil.rmtree(folder, ignore_errors=True)


def _folder(document: Document) -> Path:
    # By id and file: a document's pages never change (its file is fixed), another's never mix in.
    return Path(settings.PAGE_IMAGES_DIR) / f"{document.pk}-{document.content_hash[:16]}"


def _draw(document: Document, page: int, path: Path, *, deadline: float) -> None:
    """Draw the page into ``path`` in a child process, once a drawing slot is free; remember a
    failure beside it."""
    slots = _drawing_slots(settings.RENDER_CONCURRENCY)
    if not slots.acquire(timeout=_left(deadline)):
        raise _busy()
    try:
        png = render_page_png_isolated(
            _source(document),
            page,
            scale=RENDER_SCALE,
            max_memory_bytes=settings.RENDER_MEMORY_MB * _MEGABYTE,
            max_seconds=settings.RENDER_SECONDS,
        )
    except RenderError as error:
        failure = PageImageError(f"Page {page} could not be drawn: {error}. The text beside it is complete.")
        _write_whole(path.with_suffix(".failed"), _failure_record(failure.message))
        raise failure from None
    finally:
        slots.release()
    _write_whole(path, png)


@functools.cache
def _drawing_slots(count: int) -> threading.BoundedSemaphore:
    """This process's drawing slots: one semaphore per value of the setting, so tests may change it."""
    return threading.BoundedSemaphore(count)


def _failure_record(message: str) -> bytes:
    # With the limits it failed under: raised limits (an operator letting big pages draw) try again.
    record = {"message": message, "memory_mb": settings.RENDER_MEMORY_MB, "seconds": settings.RENDER_SECONDS}
    return json.dumps(record).encode()


def _raise_if_failed_before(path: Path) -> None:
    """The page failed under limits no lower than today's: the same answer, without drawing it again."""
    try:
        record = json.loads(path.with_suffix(".failed").read_bytes())
        message = str(record["message"])
        memory_mb, seconds = int(record["memory_mb"]), float(record["seconds"])
    except (OSError, ValueError, KeyError, TypeError):  # none, or unreadable: draw it
        return
    if memory_mb >= settings.RENDER_MEMORY_MB and seconds >= settings.RENDER_SECONDS:
        raise PageImageError(message)


def _busy() -> PagesBusyError:
    return PagesBusyError(
        f"The server is drawing other pages right now ({settings.RENDER_CONCURRENCY} at a time); "
        f"try again in {RETRY_AFTER_SECONDS} seconds. The text beside it is complete.",
        details={"retry_after_seconds": RETRY_AFTER_SECONDS},
    )


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _write_whole(path: Path, data: bytes) -> None:
    # Written whole, then renamed: two processes drawing the same page never serve half a file.
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".part")
    with os.fdopen(handle, "wb") as out:
        out.write(data)
    os.replace(temporary, path)


def _source(document: Document) -> str | bytes:
    """The original file: a path PDFium opens itself when the storage has one (no 50 MB read),
    else the bytes."""
    return _file_source(document.original)


def _layer_source(document: Document, pages: list[int], recognised: dict[int, int]) -> str | bytes | None:
    """The text layer of the pages read by OCR, when one of ``pages`` is among them."""
    if not document.text_layer or not any(page in recognised for page in pages):
        return None
    try:
        source = _file_source(document.text_layer)
    except OSError:  # gone from storage: those pages are shown unmarked, as a text not found
        return None
    return None if isinstance(source, str) and not Path(source).is_file() else source


def _file_source(file: Any) -> str | bytes:
    try:
        return str(file.path)
    except NotImplementedError:  # a storage without local paths (S3 and the like)
        with file.open("rb") as opened:
            return bytes(opened.read())


@contextmanager
def _pdf(source: str | bytes | None) -> Iterator[Any]:
    if source is None:
        yield None
        return
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(source)
    try:
        yield pdf
    finally:
        pdf.close()
