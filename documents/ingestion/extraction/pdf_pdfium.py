"""A PDF's pages as lines of text with their boxes and fonts, and its outline, through PDFium
(pypdfium2: Apache-2.0 / BSD-3; the library Chrome renders PDFs with). Pure, no Django.

Characters come with their loose boxes (the font's advance, not the ink), so a gap between two
characters is a real gap: one wider than 7 % of the line height with no space character is a
word space PDFium did not write ("(a)Whether"), one wider than a line height ends a segment
(a column gutter, a table cell). ``pdf_layout`` makes lines and reading order from segments.
"""

from __future__ import annotations

import ctypes
import threading

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from documents.ingestion.extraction.assemble import clean_line
from documents.ingestion.extraction.model import Deadline, ExtractionError, ExtractionLimits, Progress
from documents.ingestion.extraction.pdf_layout import (
    PdfBookmark,
    PdfLayout,
    PdfPage,
    Segment,
    lines_in_reading_order,
)

# PDFium is not thread-safe: one document at a time per process (the worker runs one job a process).
_PDFIUM = threading.Lock()
# In line heights (the loose box's): on the CUAD PDFs, letters of a word sit at most 0.04 apart
# and word spaces at least 0.14; 0.07 finds the spaces a PDF draws as a shift, not a character.
_SPACE_GAP = 0.07
_SEGMENT_GAP = 1.2  # a column gutter or a table cell's edge
_BOLD_NAMES = ("bold", "black", "heavy", "semibold", "demi")
_FORCE_BOLD = 1 << 18  # PDF font flag
_LINE_BREAKS = (10, 13)
_HYPHEN_MARKS = (0xFFFE, 0x02)  # how PDFium marks a hyphen it found at a line end
_MAX_OUTLINE = 5000


def read_pdf(
    data: bytes,
    *,
    filename: str,
    limits: ExtractionLimits,
    deadline: Deadline,
    on_page: Progress | None = None,
) -> PdfLayout:
    with _PDFIUM:
        document = _open(data, filename)
        try:
            count = len(document)
            if count == 0:
                raise _corrupt(filename)
            if count > limits.max_pages:
                raise ExtractionError(
                    f"{filename} has {count:,} pages; the limit is {limits.max_pages:,}. "
                    "Split it into smaller files and upload them again",
                    code="too_many_pages",
                )
            pages = []
            for index in range(count):
                deadline.check()
                page = document[index]
                try:
                    pages.append(_read_page(page))
                finally:
                    page.close()
                if on_page is not None:
                    on_page(index + 1, count)
            outline = _outline(document, count)
        except pdfium.PdfiumError:
            raise _corrupt(filename) from None
        finally:
            document.close()
    return PdfLayout(pages, outline)


def _open(data: bytes, filename: str) -> pdfium.PdfDocument:
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as error:
        if error.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
            raise ExtractionError(
                f"{filename} is password-protected: remove the password and upload again",
                code="encrypted",
            ) from None
        raise _corrupt(filename) from None


def _corrupt(filename: str) -> ExtractionError:
    return ExtractionError(
        f"{filename} is a damaged or truncated PDF that cannot be read; save or export it again "
        "and upload it again",
        code="corrupt",
    )


class _Run:
    """The segment being built."""

    def __init__(self, index: int, left: float, right: float, bottom: float, top: float) -> None:
        self.chars: list[str] = []
        self.sizes: list[float] = []
        # Before each character: its gap to the one before, in line heights, and whether the
        # PDF put a space there (None, False for the first).
        self.gaps: list[float | None] = []
        self.spaced: list[bool] = []
        self.first = index
        self.x0, self.x1, self.bottom, self.top = left, right, bottom, top
        self.last_left = left
        self.last_char = ""
        self.last_index = index

    def add(
        self, char: str, index: int, size: float, box: tuple[float, float, float, float], *, spaced: bool
    ) -> None:
        left, right, bottom, top = box
        self.gaps.append((left - self.x1) / size if self.chars else None)
        self.spaced.append(spaced)
        self.chars.append(char)
        self.sizes.append(size)
        self.x1 = max(self.x1, right)
        self.bottom, self.top = min(self.bottom, bottom), max(self.top, top)
        self.last_left, self.last_char, self.last_index = left, char, index


def _spaced_before(raw: object, run: _Run, index: int, char: str, *, space: bool) -> bool:
    """A space before the character: the PDF wrote one, or a sentence's end comes right before a
    capital in another weight ("Market Purchases." in bold, then "Subject to ..." in the body's
    font, drawn with no space between them: a bold run-in title ends there, and a word too)."""
    if space:
        return True
    return (
        run.last_char == "."
        and char.isupper()
        and bool(run.chars)
        and _is_bold(raw, run.last_index) != _is_bold(raw, index)
    )


def _read_page(page: pdfium.PdfPage) -> PdfPage:
    _, height = page.get_size()
    textpage = page.get_textpage()
    try:
        segments, ink = _PageSegments(textpage.raw).read()
    finally:
        textpage.close()
    blank = pdfium_c.FPDFPage_CountObjects(page.raw) <= 0
    return PdfPage(height, lines_in_reading_order(segments), ink, blank)


class _PageSegments:
    """A page's characters, one at a time, made into segments: a line break ends the segment
    being built, a space is remembered for the next character, and a character joins the
    segment or, too far from it or on another line, starts a new one."""

    def __init__(self, raw: object) -> None:
        self.raw = raw
        self.box = pdfium_c.FS_RECTF()  # filled again for each character
        self.segments: list[Segment] = []
        self.run: _Run | None = None
        self.space = False  # a space character since the last drawn one
        self.ink = 0  # characters drawn

    def read(self) -> tuple[list[Segment], int]:
        """The segments and the count of characters drawn."""
        count = pdfium_c.FPDFText_CountChars(self.raw)
        for index in range(max(0, count)):
            self._take(index, pdfium_c.FPDFText_GetUnicode(self.raw, index))
        _close(self.run, self.raw, self.segments)
        return self.segments, self.ink

    def _take(self, index: int, code: int) -> None:
        if code in _LINE_BREAKS:
            self._end_run()
            self.space = False
        elif _is_space(code):
            self.space = True
        else:
            char = _drawn_char(code)
            if char is not None:
                self._draw(index, char)

    def _end_run(self) -> None:
        _close(self.run, self.raw, self.segments)
        self.run = None

    def _draw(self, index: int, char: str) -> None:
        pdfium_c.FPDFText_GetLooseCharBox(self.raw, index, self.box)
        box = _upright(self.box)
        left, right, bottom, top = box
        # The loose box's height is the font's line height as drawn; the font size PDFium
        # reports leaves out the text's scaling (a page printed smaller reports the same).
        size = max(top - bottom, 0.5)
        if self.run is not None:
            same_line = _on_run_line(self.run, bottom, top)
            if same_line and _drawn_again(self.run, char, left, size):
                return  # the same glyph drawn twice, a shade apart: "fake bold"
            if not same_line or _apart_from_run(self.run, left, size):
                self._end_run()
        if self.run is None:
            self.run = _Run(index, left, right, bottom, top)
        self.run.add(
            char, index, size, box, spaced=_spaced_before(self.raw, self.run, index, char, space=self.space)
        )
        self.space = False
        self.ink += 1


def _is_space(code: int) -> bool:
    """A space, a tab, a no-break space or one of Unicode's spaces of set widths."""
    return code in (32, 9, 0xA0) or 0x2000 <= code <= 0x200A or code == 0x3000


def _drawn_char(code: int) -> str | None:
    """The character a code draws: "-" for a hyphen PDFium marked, None for a control code or a
    code that is no character (a surrogate, beyond Unicode)."""
    if code in _HYPHEN_MARKS:
        return "-"
    if code < 32 or 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
        return None
    return chr(code)


def _upright(box: pdfium_c.FS_RECTF) -> tuple[float, float, float, float]:
    """(left, right, bottom, top) of a character's box, bottom below top whichever way round the
    PDF gives them."""
    left, right, bottom, top = box.left, box.right, box.bottom, box.top
    if top < bottom:
        bottom, top = top, bottom
    return left, right, bottom, top


def _on_run_line(run: _Run, bottom: float, top: float) -> bool:
    """The character overlaps the run vertically by half the lower height of the two at least."""
    overlap = min(top, run.top) - max(bottom, run.bottom)
    return overlap >= 0.5 * min(top - bottom, run.top - run.bottom)


def _drawn_again(run: _Run, char: str, left: float, size: float) -> bool:
    """The run's last character again, a tenth of a line height from it at most."""
    return char == run.last_char and abs(left - run.last_left) < 0.1 * size


def _apart_from_run(run: _Run, left: float, size: float) -> bool:
    """Past a column gutter or a table cell's edge, or back left of the run's end by more than
    half a line height."""
    gap = left - run.x1
    return gap > _SEGMENT_GAP * size or gap < -0.5 * size


def _close(run: _Run | None, raw: object, segments: list[Segment]) -> None:
    if run is None or not run.chars:
        return
    text = clean_line("".join(_with_spaces(run)))
    if text:
        sizes = sorted(run.sizes)
        segments.append(
            Segment(
                text=text,
                x0=run.x0,
                x1=run.x1,
                bottom=run.bottom,
                top=run.top,
                size=round(sizes[len(sizes) // 2], 1),
                bold=_is_bold(raw, run.first),
                chars=len(run.sizes),
            )
        )


def _with_spaces(run: _Run) -> list[str]:
    """The run's characters with a space where the PDF wrote one, or where the gap before a
    character is wider than the run's usual gap between letters by ``_SPACE_GAP`` (letter-spaced
    text has wide gaps everywhere, and no space inside its words)."""
    gaps = sorted(
        gap for gap, spaced in zip(run.gaps, run.spaced, strict=True) if gap is not None and not spaced
    )
    usual = max(0.0, gaps[len(gaps) // 2]) if len(gaps) >= 4 else 0.0
    out: list[str] = []
    for char, gap, spaced in zip(run.chars, run.gaps, run.spaced, strict=True):
        if out and (spaced or (gap is not None and gap - usual > _SPACE_GAP)):
            out.append(" ")
        out.append(char)
    return out


_FONT_NAME = ctypes.create_string_buffer(256)


def _is_bold(raw: object, index: int) -> bool:
    """From the first character's font: its weight, its flags or its name ("Helvetica-Bold")."""
    flags = ctypes.c_int(0)
    length = pdfium_c.FPDFText_GetFontInfo(raw, index, _FONT_NAME, len(_FONT_NAME), ctypes.byref(flags))
    name = _FONT_NAME.value.decode("latin-1", "replace").lower() if length else ""
    weight = pdfium_c.FPDFText_GetFontWeight(raw, index)
    return weight >= 600 or bool(flags.value & _FORCE_BOLD) or any(word in name for word in _BOLD_NAMES)


def _outline(document: pdfium.PdfDocument, pages: int) -> list[PdfBookmark]:
    entries: list[PdfBookmark] = []
    for bookmark in document.get_toc(max_depth=6):
        if len(entries) >= _MAX_OUTLINE:
            break
        entry = _outline_entry(bookmark, pages)
        if entry is not None:
            entries.append(entry)
    return entries


def _outline_entry(bookmark: pdfium.PdfBookmark, pages: int) -> PdfBookmark | None:
    """The bookmark as an outline entry, or None without a title or a page of the document."""
    title = clean_line(bookmark.get_title() or "")
    destination = bookmark.get_dest()
    index = destination.get_index() if destination is not None else None
    if not title or index is None or not 0 <= index < pages:
        return None
    return PdfBookmark(bookmark.level, title, index, _destination_y(destination))


def _destination_y(destination: pdfium.PdfDest | None) -> float | None:
    """The height on its page a destination shows at the top, where its view gives one."""
    mode, position = destination.get_view() if destination is not None else (0, [])
    if mode == pdfium_c.PDFDEST_VIEW_XYZ and len(position) >= 2:
        return float(position[1])
    if mode in (pdfium_c.PDFDEST_VIEW_FITH, pdfium_c.PDFDEST_VIEW_FITBH) and position:
        return float(position[0])
    return None
