"""A Word (.docx) file's body as blocks: heading styles become headings, a table one row a line
(python-docx, MIT). Pure, no Django.

A .docx is a zip: its members' sizes are read from the archive's directory first, and one that
would expand past the limits (size or ratio) is refused before anything is decompressed. Python's
zipfile never inflates a member past the size the directory gives it, and python-docx parses
the XML without resolving entities, so neither a zip bomb nor an entity bomb gets through.

An entity it leaves unresolved (``&company;`` declared in the file's own DTD) is a node of its own
in the paragraph's text, and python-docx's text stops at it: everything after it in the run was
silently lost. ``_fold_entities`` puts the text back: a declared value that is plain text (no
further references, at most ``ENTITY_MAX_CHARS``: nothing a bomb can grow from) in its place,
anything else (an external or nested entity) kept as written, ``&name;``, so a reader sees that
something was there.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

from documents.ingestion.extraction.assemble import Block, clean_line
from documents.ingestion.extraction.model import Deadline, ExtractionError, ExtractionLimits

ENTITY_MAX_CHARS = 1_000
_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def docx_blocks(
    data: bytes, *, filename: str, limits: ExtractionLimits, deadline: Deadline
) -> tuple[list[Block], int]:
    """The blocks, and the pages they lie on: a Word file has pages only where it says where
    they break (a page break, or the breaks Word wrote when it last laid the file out); one
    without any has no page map (0), rather than "1 page" for a text of any length."""
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
    _fold_entities(document.element.body)
    blocks: list[Block] = []
    page = 1
    for element in document.element.body.iterchildren():
        deadline.check()
        if element.tag == f"{_W}p":
            paragraph = Paragraph(element, document)
            breaks_before, breaks_inside = _page_breaks(element)
            page += breaks_before
            text = clean_line(paragraph.text)
            if text:
                level = _heading_level(paragraph)
                blocks.append(Block(text, page, level, "style" if level else ""))
            page += breaks_inside
        elif element.tag == f"{_W}tbl":
            blocks.extend(_table_rows(Table(element, document), page))
    # A break after the last text starts no page of its own.
    pages = max((block.page for block in blocks), default=1)
    return blocks, (pages if pages > 1 else 0)


def _fold_entities(body: object) -> None:
    """Each entity reference under ``body`` replaced by text: its declared value when that is
    plain and short, else the reference as written; the text after it stays where it was."""
    from lxml import etree

    values = _plain_entity_values(body)
    for entity in list(body.iter(etree.Entity)):  # type: ignore[attr-defined]
        _put_text_in_place(entity, values.get(entity.name, f"&{entity.name};") + (entity.tail or ""))


def _plain_entity_values(body: object) -> dict[str, str]:
    """The entities the file's own DTD declares as plain text (no further references, at most
    ``ENTITY_MAX_CHARS``): nothing a bomb can grow from."""
    dtd = body.getroottree().docinfo.internalDTD  # type: ignore[attr-defined]
    if dtd is None:
        return {}
    return {
        declared.name: declared.content
        for declared in dtd.iterentities()
        if declared.content is not None
        and "&" not in declared.content
        and len(declared.content) <= ENTITY_MAX_CHARS
    }


def _put_text_in_place(entity: Any, text: str) -> None:
    """``entity`` removed, ``text`` where it was: the tail of the node before it, else the start
    of its parent's text."""
    previous, parent = entity.getprevious(), entity.getparent()
    if previous is not None:
        previous.tail = (previous.tail or "") + text
    else:
        parent.text = (parent.text or "") + text
    parent.remove(entity)


def _page_breaks(paragraph: Any) -> tuple[int, int]:
    """Page breaks before a paragraph (its "page break before" property, a rendered break at its
    start) and inside it (a hard break, a rendered break later on), counted once each."""
    breaks = [
        element
        for element in paragraph.iter(f"{_W}br", f"{_W}lastRenderedPageBreak")
        if element.tag.endswith("lastRenderedPageBreak") or element.get(f"{_W}type") == "page"
    ]
    at_start = 1 if breaks and not _text_before(paragraph, breaks[0]).strip() else 0
    starts = int(_breaks_page_before(paragraph)) or at_start
    return starts, len(breaks) - at_start


def _text_before(paragraph: Any, stop: object) -> str:
    """The paragraph's text up to the element ``stop``."""
    run_texts = []
    for element in paragraph.iter(f"{_W}t", f"{_W}br", f"{_W}lastRenderedPageBreak"):
        if element is stop:
            break
        if element.tag == f"{_W}t":
            run_texts.append(element.text or "")
    return "".join(run_texts)


def _breaks_page_before(paragraph: Any) -> bool:
    """Whether the paragraph's "page break before" property is set (on when it has no value)."""
    before = paragraph.find(f"{_W}pPr/{_W}pageBreakBefore")
    return before is not None and (before.get(f"{_W}val") or "true") not in ("0", "false")


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


def _table_rows(table: object, page: int) -> list[Block]:
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
            rows.append(Block(" | ".join(cells), page, new_paragraph=not rows))
    return rows
