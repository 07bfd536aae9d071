"""A PDF's pages as pictures, and where a stretch of the extracted text lies on a page (pure, no Django).

The document page shows a selected node on the original page: ``render_page_png_isolated``
draws the page (in a child process with a memory cap and a time limit, as extraction runs: a
page's images can be bombs too; a page too large for a bounded bitmap is drawn smaller or
refused, ``drawing_scale``), and ``text_boxes`` finds the node's text among the page's
characters and returns the rectangles of its lines, as fractions of the page, for the browser
to draw over the picture.

The extracted text is cleaned (headers and footers dropped, hyphenated words joined, markdown
heading marks added, NFKC), so it is matched on letters and digits only: both sides are reduced
to their lowercased alphanumerics, with a map back to PDFium's character indices.
"""

from __future__ import annotations

import io
import math
import unicodedata
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from documents.ingestion.extraction.isolated import ChildStopped, ChildTooSlow, cap_memory, run_isolated

# Letters matched at each end of the text, longest first: a shorter probe still finds a start
# whose first words were cut differently (a heading's number, a header dropped in between).
_PROBES = (80, 40, 20)


@dataclass(frozen=True, slots=True)
class Box:
    """A rectangle on the page, as fractions of its width and height from the top left."""

    left: float
    top: float
    width: float
    height: float


def text_boxes(page: Any, text: str, *, from_top: bool, to_bottom: bool) -> list[Box]:
    """Where ``text`` (a stretch of the extracted text that lies on ``page``, a pypdfium2 page)
    is on it: one box per line. ``from_top``/``to_bottom``: the stretch starts at the page's
    start or runs to its end (a node over several pages), so an end that cannot be matched is
    the page's edge. [] when the text cannot be found (the page is still shown, unmarked)."""
    textpage = page.get_textpage()
    try:
        count = textpage.count_chars()
        if count <= 0:
            return []
        page_keys, index_of = _keys(textpage.get_text_range(0, count))
        wanted, _ = _keys(text)
        if not wanted:
            return []
        matched = _matched_keys(page_keys, wanted, from_top=from_top, to_bottom=to_bottom)
        if matched is None:
            return []
        start, end = matched
        first = index_of[start] if start < len(index_of) else count
        last = index_of[end - 1] + 1 if end - 1 < len(index_of) else count
        return _line_boxes(page, textpage, first, last)
    finally:
        textpage.close()


def _matched_keys(page_keys: str, wanted: str, *, from_top: bool, to_bottom: bool) -> tuple[int, int] | None:
    """Where ``wanted`` starts and ends among the page's keys; None when it is not found."""
    # Matched even where the stretch runs from the page's top or to its bottom: the page's
    # running header and footer are not part of it. Only a miss falls back to the page's edge.
    start = _find_start(page_keys, wanted)
    if start is None:
        start = 0 if from_top else None
    if start is None:
        return None
    end = _find_end(page_keys, wanted, after=start)
    if end is None:
        end = len(page_keys) if to_bottom else None
    if end is None or end <= start:
        return None
    return start, end


def _line_boxes(page: Any, textpage: Any, first: int, last: int) -> list[Box]:
    """The boxes of PDFium's characters [first, last): one per line, as fractions of the page."""
    width, height = page.get_size()
    boxes = []
    for rect in range(textpage.count_rects(first, last - first)):
        left, bottom, right, top = textpage.get_rect(rect)
        boxes.append(
            Box(
                left=round(max(0.0, left / width), 4),
                top=round(max(0.0, (height - top) / height), 4),
                width=round((right - left) / width, 4),
                height=round((top - bottom) / height, 4),
            )
        )
    return boxes


def _keys(text: str) -> tuple[str, list[int]]:
    """The lowercased letters and digits of ``text`` (NFKC), and each one's index in ``text``."""
    keys: list[str] = []
    where: list[int] = []
    for index, char in enumerate(text):
        for folded in unicodedata.normalize("NFKC", char).lower():
            if folded.isalnum():
                keys.append(folded)
                where.append(index)
    return "".join(keys), where


def _find_start(page_keys: str, wanted: str) -> int | None:
    for size in _PROBES:
        found = page_keys.find(wanted[:size])
        if found >= 0:
            return found
    return None


def _find_end(page_keys: str, wanted: str, *, after: int) -> int | None:
    if page_keys.startswith(wanted, after):
        return after + len(wanted)
    for size in _PROBES:
        probe = wanted[-size:]
        found = page_keys.find(probe, after)
        if found >= 0:
            return found + len(probe)
    return None


# The largest bitmap drawn: 60 MB in PDFium's BGR, about as much again as PIL's copy and the PNG,
# well inside OPENFABLE_RENDER_MEMORY_MB. An A0 poster still draws at the full 1.5 pixels per
# point (18 million pixels); a larger page is drawn smaller, to fit.
MAX_PIXELS = 20_000_000
# Below this many pixels per point a 12 pt letter is under a pixel high: a page so large that it
# would fit the budget only that small is refused rather than drawn as an empty picture.
SMALLEST_SCALE = 0.05
_METRES_PER_POINT = 0.0254 / 72


class RenderError(Exception):
    """The page could not be drawn (too large, too slow, too much memory, a damaged page)."""


def drawing_scale(width: float, height: float, *, scale: float, max_pixels: int = MAX_PIXELS) -> float:
    """The scale to draw a ``width`` x ``height`` point page at: ``scale``, or less so that the
    bitmap holds at most ``max_pixels``; ``RenderError`` when that is below ``SMALLEST_SCALE``.

    The size is PDFium's own (``page.get_size()``), the one its bitmap is made from; the PDFium
    here ignores ``/UserUnit`` when drawing, and one that honours it reports the larger size."""
    area = max(width, 1.0) * max(height, 1.0)
    fitted = min(scale, math.sqrt(max_pixels / area))
    if fitted < SMALLEST_SCALE:
        raise RenderError(
            f"the page is {_length(width)} x {_length(height)} ({width:,.0f} x {height:,.0f} points), "
            "too large to draw"
        )
    return fitted


def render_page_png(source: str | bytes, page_number: int, *, scale: float) -> bytes:
    """Page ``page_number`` (1-based) of the PDF at ``source`` (a path or the bytes) as a PNG, at
    ``scale`` pixels per point or less (``drawing_scale``)."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(source)
    try:
        page = document[page_number - 1]
        try:
            width, height = page.get_size()
            # Sized before anything is drawn: the bitmap is the one allocation a page's size decides.
            image = page.render(scale=drawing_scale(width, height, scale=scale)).to_pil()
        finally:
            page.close()
    finally:
        document.close()
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False)
    return out.getvalue()


def render_page_png_isolated(
    source: str | bytes,
    page_number: int,
    *,
    scale: float,
    max_memory_bytes: int,
    max_seconds: float,
) -> bytes:
    """``render_page_png`` in a fresh process (``run_isolated``, as extraction runs) that may
    allocate ``max_memory_bytes`` and is killed after ``max_seconds``; ``RenderError`` when it
    fails."""
    try:
        kind, payload = run_isolated(
            f"{__name__}:_child", (source, page_number, scale, max_memory_bytes), max_seconds=max_seconds
        )
    except ChildTooSlow:
        raise RenderError(f"drawing it took longer than {max_seconds:g} seconds") from None
    except ChildStopped as stopped:
        if stopped.killed:
            raise RenderError(_too_big(max_memory_bytes)) from None
        raise RenderError("the drawing stopped") from None
    if kind != "ok":
        raise RenderError(str(payload))
    result: bytes = payload
    return result


def _child(
    sender: Connection, source: str | bytes, page_number: int, scale: float, max_memory_bytes: int
) -> None:
    import PIL.Image  # noqa: F401  (loaded before the cap, so it bounds the drawing alone)
    import pypdfium2  # noqa: F401

    answer: tuple[str, Any]
    try:
        cap_memory(max_memory_bytes)
        answer = ("ok", render_page_png(source, page_number, scale=scale))
    except RenderError as error:
        answer = ("error", str(error))
    except MemoryError:
        answer = ("error", _too_big(max_memory_bytes))
    except Exception as error:  # a damaged page: a sentence, not a traceback
        answer = ("error", f"the page is damaged ({type(error).__name__})")
    sender.send(answer)
    sender.close()


def _too_big(max_memory_bytes: int) -> str:
    return f"drawing it needs more than the {max_memory_bytes // (1024 * 1024):,} MB of memory allowed"


def _length(points: float) -> str:
    metres = points * _METRES_PER_POINT
    if metres >= 1000:
        return f"{metres / 1000:,.0f} km"
    if metres >= 1:
        return f"{metres:,.1f} m"
    return f"{metres * 100:,.0f} cm"
