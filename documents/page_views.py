"""A PDF document's pages beside a selected node: the pictures, drawn on the server and kept on
disk (``OPENFABLE_PAGE_IMAGES_DIR``, default DATA_DIR/page-images), and the node's lines on them.

The document page shows them (``documents.views``); whoever asks has already been allowed to see
the document. Nothing here writes to the database.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from documents.ingestion.extraction.pdf_pages import Box, RenderError, render_page_png_isolated, text_boxes
from documents.models import Document
from openfable.errors import NotFoundError, UserInputError

# Pixels per PDF point: an A4 page is 893 x 1263 pixels, sharp enough to read beside the text.
RENDER_SCALE = 1.5
# A node over many pages shows its first few (a section of a long report spans dozens).
PAGES_SHOWN = 3
_MEGABYTE = 1024 * 1024


class PageImageError(UserInputError):
    """The page could not be drawn; the text beside it still shows the node."""

    status = 422
    code = "page_not_drawn"


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
    views = []
    with _pdf(document) as pdf:
        for number in pages:
            page_start, page_end = spans[number]
            part_start, part_end = max(start, page_start), min(end, page_end)
            page = pdf[number - 1]
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
    """The PNG of page ``page`` of the document's PDF, drawn once and then read from disk."""
    if document.format != Document.Format.PDF or not document.original:
        raise NotFoundError(f"Document {document.pk} is not a PDF: it has no page images.")
    if not any(span[0] == page for span in document.page_spans):
        raise NotFoundError(
            f"Document {document.pk} has no page {page}; its pages are 1 to {len(document.page_spans)}."
        )
    folder = _folder(document)
    path = folder / f"{page}.png"
    if path.exists():
        return path
    try:
        png = render_page_png_isolated(
            _source(document),
            page,
            scale=RENDER_SCALE,
            max_memory_bytes=settings.EXTRACTION_MEMORY_MB * _MEGABYTE,
            max_seconds=min(60.0, settings.EXTRACTION_SECONDS),
        )
    except RenderError as error:
        raise PageImageError(
            f"Page {page} could not be drawn: {error}. The text beside it is complete."
        ) from None
    folder.mkdir(parents=True, exist_ok=True)
    # Written whole, then renamed: two requests drawing the same page never serve half a file.
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".part")
    with os.fdopen(handle, "wb") as out:
        out.write(png)
    os.replace(temporary, path)
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


def _source(document: Document) -> str | bytes:
    """A path PDFium opens itself when the storage has one (no 50 MB read), else the bytes."""
    try:
        return str(document.original.path)
    except NotImplementedError:  # a storage without local paths (S3 and the like)
        with document.original.open("rb") as file:
            return bytes(file.read())


@contextmanager
def _pdf(document: Document) -> Iterator[Any]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(_source(document))
    try:
        yield pdf
    finally:
        pdf.close()
