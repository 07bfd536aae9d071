"""Which format a file is, from its content; the name only breaks a tie (pure, no Django)."""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath

from documents.ingestion.extraction.model import (
    DOCX,
    FORMAT_NAMES,
    HTML,
    MARKDOWN,
    PDF,
    TEXT,
    ExtractionError,
)

_EXTENSIONS = {
    ".pdf": PDF,
    ".docx": DOCX,
    ".html": HTML,
    ".htm": HTML,
    ".xhtml": HTML,
    ".md": MARKDOWN,
    ".markdown": MARKDOWN,
    ".txt": TEXT,
    ".text": TEXT,
}
# A PDF may carry a few bytes of junk before its header; readers look in the first kilobyte.
_PDF_HEADER_WINDOW = 1024
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # old Word .doc, .xls, .msg
# Markup that only an HTML page opens with; a markdown file may hold a tag, but does not start so.
_HTML_START = re.compile(
    rb"^(?:\s|<!--.*?-->|<\?xml[^>]*>)*<(?:!doctype\s+html|html|head|body|meta|title|link|script|style"
    rb"|div|p|h[1-6]|table|article|main|section|nav|header|ul|!--)[\s>/]",
    re.IGNORECASE | re.DOTALL,
)
_SNIFF_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Detected:
    format: str
    name_format: str | None  # what the file name says, if it names a known format
    mismatch: str  # a sentence when the two disagree, else ""


def format_from_name(filename: str) -> str | None:
    return _EXTENSIONS.get(PurePosixPath(filename.lower()).suffix)


def detect_format(data: bytes, *, filename: str) -> Detected:
    """The format of ``data`` from its magic bytes; ``ExtractionError`` for a format not read here."""
    by_name = format_from_name(filename)
    found = _from_content(data, filename, by_name)
    mismatch = ""
    if by_name is not None and by_name != found and {by_name, found} != {MARKDOWN, TEXT}:
        mismatch = (
            f"{filename} is named as {FORMAT_NAMES[by_name]} but its content is {FORMAT_NAMES[found]}; "
            f"it was read as {FORMAT_NAMES[found]}"
        )
    return Detected(found, by_name, mismatch)


def _from_content(data: bytes, filename: str, by_name: str | None) -> str:
    if not data:
        raise ExtractionError(f"{filename} is empty; upload a file with some text in it", code="empty")
    if b"%PDF-" in data[:_PDF_HEADER_WINDOW]:
        return PDF
    if data.startswith(b"PK\x03\x04"):
        return _zip_format(data, filename)
    if data.startswith(_OLE2):
        raise ExtractionError(
            f"{filename} is an old Office file (.doc, .xls); save it as .docx or PDF and upload it again",
            code="unsupported_format",
        )
    head = data[:_SNIFF_BYTES].lstrip(b"\xef\xbb\xbf")
    if _HTML_START.match(head):
        return HTML
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise ExtractionError(
            f"{filename} is not a format OpenFable reads; upload a PDF, Word (.docx), HTML, "
            "Markdown or UTF-8 text file",
            code="unsupported_format",
        )
    # Text that opens with "<" and no telling tag: the name decides (a saved page named .html).
    if by_name == HTML and head.lstrip().startswith(b"<"):
        return HTML
    return MARKDOWN if by_name == MARKDOWN else TEXT


def _zip_format(data: bytes, filename: str) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, ValueError, OSError):
        raise ExtractionError(
            f"{filename} is a damaged or truncated zip archive (a .docx is one); "
            "save it again and upload it again",
            code="corrupt",
        ) from None
    if "word/document.xml" in names:
        return DOCX
    raise ExtractionError(
        f"{filename} is a zip archive but not a Word (.docx) file; upload a PDF, Word (.docx), "
        "HTML, Markdown or UTF-8 text file",
        code="unsupported_format",
    )
