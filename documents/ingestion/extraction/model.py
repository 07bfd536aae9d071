"""What extraction returns, the limits it runs under and the one error it raises (pure, no Django)."""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

PDF = "pdf"
DOCX = "docx"
HTML = "html"
MARKDOWN = "markdown"
TEXT = "text"
FORMATS = (PDF, DOCX, HTML, MARKDOWN, TEXT)
# Told (pages read, pages in all) after each page: the job's progress and heartbeat.
Progress = Callable[[int, int], None]
# How each format is named in a sentence a person reads.
FORMAT_NAMES = {
    PDF: "a PDF",
    DOCX: "a Word (.docx) file",
    HTML: "an HTML page",
    MARKDOWN: "Markdown text",
    TEXT: "plain text",
}


class ExtractionError(Exception):
    """A file that cannot be read, with one sentence saying what was wrong and what to do.

    The layer above maps it to the app's ``DocumentInputError`` (refused upload, or a failed job
    with this message)."""

    def __init__(self, message: str, *, code: str = "unreadable_file") -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # a stable name per kind: encrypted, no_text_layer, too_many_pages, ...


@dataclass(frozen=True)
class ExtractionLimits:
    max_pages: int = 2000
    # Wall-clock seconds, checked between pages and paragraphs (a cooperative deadline: one page
    # stuck inside PDFium is bounded by the worker's own time limit, not by this).
    max_seconds: float = 300.0
    # The text extraction may produce: a small file that expands past it is a bomb, not a document.
    max_text_chars: int = 20_000_000
    # A DOCX (zip) whose members add up to more than this, or expand more than this many times
    # their compressed size, is refused before anything is decompressed.
    max_uncompressed_bytes: int = 200_000_000
    max_compression_ratio: float = 100.0


@dataclass(frozen=True)
class OcrOptions:
    """How pages that are pictures get their text (``ocr.recognise_pages``): Tesseract's
    languages (``eng``, ``deu``, ...; several are read together), and the seconds a page may
    take, which also raise the extraction's time limit by that much for each such page."""

    languages: tuple[str, ...] = ("eng",)
    seconds_per_page: float = 60.0


@dataclass(frozen=True, slots=True)
class PageSpan:
    """Page ``page`` (1-based) is ``text[start:end]``; the spans partition the text in order."""

    page: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class HeadingHint:
    """A heading extraction wrote as a markdown line: ``text[start:end]`` is ``"## Title"``."""

    start: int
    end: int
    level: int  # 1 = "#"
    title: str
    source: str  # "outline" (PDF bookmarks), "font" (larger or bold line), "style" (Word), "tag" (HTML)


@dataclass(frozen=True)
class Extracted:
    text: str  # the cleaned document text, structure as markdown headings
    format: str  # one of FORMATS, from the content
    pages: int
    page_spans: tuple[PageSpan, ...]  # one per page, partitioning ``text``
    headings: tuple[HeadingHint, ...] = ()
    # A sentence when the file's name says another format than its content (read by content).
    mismatch: str = ""
    # The pages (1-based) whose text was recognised from their picture (OCR), and the PDF of
    # those pages, in that order, with the recognised text placed over them: where a passage's
    # lines on those pages are found (the original file has no text there).
    recognised_pages: tuple[int, ...] = ()
    text_layer: bytes = b""

    @cached_property
    def _page_starts(self) -> tuple[int, ...]:
        return tuple(span.start for span in self.page_spans)

    def pages_of(self, start: int, end: int) -> tuple[int, ...]:
        """The pages ``text[start:end]`` lies on (a node's or a chunk's ``pages``)."""
        if not self.page_spans:
            return ()
        first = max(0, bisect.bisect_right(self._page_starts, start) - 1)
        last = max(first, bisect.bisect_left(self._page_starts, max(start + 1, end)) - 1)
        return tuple(
            span.page for span in self.page_spans[first : last + 1] if span.end > span.start or first == last
        )


class Deadline:
    """The time limit, checked at safe points (between pages, paragraphs)."""

    def __init__(self, seconds: float, filename: str) -> None:
        self.seconds = seconds
        self.filename = filename
        self.expires = time.monotonic() + seconds

    def extend(self, seconds: float) -> None:
        """Allow ``seconds`` more (pages read by OCR)."""
        self.seconds += seconds
        self.expires += seconds

    def check(self) -> None:
        if time.monotonic() > self.expires:
            raise ExtractionError(
                f"{self.filename}: reading the file took longer than {self.seconds:g} seconds; "
                "split it into smaller files and upload them again",
                code="too_slow",
            )
