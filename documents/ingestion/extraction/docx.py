"""A Word (.docx) file's body as blocks: heading styles become headings, a table one row a line
(python-docx, MIT). Pure, no Django.

A .docx is a zip: its members' sizes are read from the archive's directory first, and one that
would expand past the limits (size or ratio) is refused before anything is decompressed. Python's
zipfile never inflates a member past the size the directory gives it, and python-docx parses
the XML without resolving entities, so neither a zip bomb nor an entity bomb gets through.
"""

from __future__ import annotations

import io
import re
import zipfile

from documents.ingestion.extraction.assemble import Block, clean_line
from documents.ingestion.extraction.model import Deadline, ExtractionError, ExtractionLimits

_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def docx_blocks(data: bytes, *, filename: str, limits: ExtractionLimits, deadline: Deadline) -> list[Block]:
    _check_archive(data, filename, limits)
    import docx  # python-docx: imported when a Word file is read
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
    except Exception as error:  # python-docx raises KeyError, ValueError, lxml errors...
        raise ExtractionError(
            f"{filename} is a damaged Word file that cannot be read ({type(error).__name__}); "
            "save it again from Word and upload it again",
            code="corrupt",
        ) from None
    blocks: list[Block] = []
    for element in document.element.body.iterchildren():
        deadline.check()
        if element.tag == f"{_W}p":
            paragraph = Paragraph(element, document)
            text = clean_line(paragraph.text)
            if text:
                level = _heading_level(paragraph)
                blocks.append(Block(text, 1, level, "style" if level else ""))
        elif element.tag == f"{_W}tbl":
            blocks.extend(_table_rows(Table(element, document)))
    return blocks


def _check_archive(data: bytes, filename: str, limits: ExtractionLimits) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        raise ExtractionError(
            f"{filename} is a damaged or truncated Word file; save it again and upload it again",
            code="corrupt",
        ) from None
    expanded = sum(member.file_size for member in members)
    packed = max(1, sum(member.compress_size for member in members))
    if expanded > limits.max_uncompressed_bytes or expanded / packed > limits.max_compression_ratio:
        raise ExtractionError(
            f"{filename} expands to {expanded:,} bytes from {packed:,} (a zip bomb?); the limits are "
            f"{limits.max_uncompressed_bytes:,} bytes and {limits.max_compression_ratio:g} times. "
            "Upload the document as a PDF, or split it",
            code="too_large",
        )


def _heading_level(paragraph: object) -> int:
    """Word's "Title" and "Heading 1-9" styles (and styles based on them), else an outline level."""
    style = getattr(paragraph, "style", None)
    while style is not None:
        name = (style.name or "").strip()
        if name.lower() == "title":
            return 1
        match = _HEADING_STYLE.match(name)
        if match:
            return int(match.group(1))
        style = style.base_style
    properties = paragraph._p.pPr  # type: ignore[attr-defined]
    outline = properties.find(f"{_W}outlineLvl") if properties is not None else None
    if outline is not None:
        value = outline.get(f"{_W}val", "")
        if value.isdigit() and int(value) < 9:
            return int(value) + 1
    return 0


def _table_rows(table: object) -> list[Block]:
    """One block a row, cells separated by " | "; a merged cell counts once."""
    rows: list[Block] = []
    for row in table.rows:  # type: ignore[attr-defined]
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(clean_line(" ".join(p.text for p in cell.paragraphs)))
        if any(cells):
            rows.append(Block(" | ".join(cells), 1, new_paragraph=not rows))
    return rows
