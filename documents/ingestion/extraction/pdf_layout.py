"""A PDF page's text pieces into lines in reading order, columns included (pure, no Django).

A PDF draws text in any order; what the reader gets is pieces ("segments": runs of characters on
one line with no wide gap inside) with their boxes. Segments on the same baseline make a line,
lines read top to bottom, and where a page has two columns (a vertical white gutter that prose
lies on both sides of) the left column is read before the right one, band by band between the
full-width lines (a title, a footer) that cross the gutter. A table's cells are short, so a
table is read row by row, not column by column.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

# Gutter: at least this wide (points), with at least this many lines of prose on each side.
_MIN_GUTTER = 8.0
_MIN_COLUMN_LINES = 5
# A column is prose: its segments carry at least this many words (median); table cells carry fewer.
_MIN_COLUMN_WORDS = 3
# The gutter lies in the middle of the text, not in its margins.
_GUTTER_REACH = (0.2, 0.8)
# Segments on one line overlap vertically by at least this share of the smaller one.
_SAME_LINE_OVERLAP = 0.5


@dataclass
class Segment:
    """Characters on one line with no wide gap inside; PDF coordinates (y grows upwards)."""

    text: str
    x0: float
    x1: float
    bottom: float
    top: float
    size: float  # font size in points (median of its characters)
    bold: bool = False
    chars: int = 0  # characters that carry ink (for the body font size)

    @property
    def height(self) -> float:
        return max(self.top - self.bottom, 0.1)


@dataclass
class TextLine:
    text: str
    x0: float
    x1: float
    bottom: float
    top: float
    size: float
    bold: bool
    chars: int
    segments: list[Segment] = field(default_factory=list, repr=False)

    @property
    def middle(self) -> float:
        return (self.top + self.bottom) / 2


def lines_in_reading_order(segments: Sequence[Segment]) -> list[TextLine]:
    """The page's lines, top to bottom, each column whole before the next where there are two."""
    lines = _group_lines(segments)
    gutter = _find_gutter(lines)
    if gutter is None:
        return [_join(line) for line in lines]
    return _read_columns(lines, gutter)


def _group_lines(segments: Sequence[Segment]) -> list[list[Segment]]:
    """Segments sharing a baseline, sorted left to right; lines sorted top to bottom."""
    ordered = sorted(segments, key=lambda segment: -(segment.top + segment.bottom) / 2)
    lines: list[list[Segment]] = []
    bounds: list[tuple[float, float]] = []
    for segment in ordered:
        placed = False
        # Only the last few lines can share this one's baseline (the list is sorted by height).
        for index in range(len(lines) - 1, max(-1, len(lines) - 4), -1):
            bottom, top = bounds[index]
            overlap = min(top, segment.top) - max(bottom, segment.bottom)
            if overlap >= _SAME_LINE_OVERLAP * min(top - bottom, segment.height):
                lines[index].append(segment)
                bounds[index] = (min(bottom, segment.bottom), max(top, segment.top))
                placed = True
                break
        if not placed:
            lines.append([segment])
            bounds.append((segment.bottom, segment.top))
    for line in lines:
        line.sort(key=lambda segment: segment.x0)
    return lines


def _join(segments: list[Segment]) -> TextLine:
    sized = [segment for segment in segments if segment.chars] or segments
    ink = sum(segment.chars for segment in segments)
    size = max(sized, key=lambda segment: segment.chars).size
    return TextLine(
        text=_joined_text(segments),
        x0=min(segment.x0 for segment in segments),
        x1=max(segment.x1 for segment in segments),
        bottom=min(segment.bottom for segment in segments),
        top=max(segment.top for segment in segments),
        size=size,
        bold=all(segment.bold for segment in sized),
        chars=ink,
        segments=segments,
    )


def _joined_text(segments: list[Segment]) -> str:
    parts: list[str] = []
    previous: Segment | None = None
    for segment in segments:
        if previous is not None and _needs_space(previous, segment, parts[-1]):
            parts.append(" ")
        parts.append(segment.text)
        previous = segment
    return "".join(parts).strip()


def _needs_space(previous: Segment, segment: Segment, written: str) -> bool:
    # Pieces that touch are one word drawn in two pieces (a change of font mid-word).
    touching = segment.x0 - previous.x1 < 0.15 * max(previous.size, segment.size, 1.0)
    return not touching and not written.endswith(" ") and not segment.text.startswith(" ")


def _find_gutter(lines: list[list[Segment]]) -> tuple[float, float] | None:
    """The widest vertical white strip in the middle of the text that prose lies on both sides of."""
    segments = [segment for line in lines for segment in line]
    if len(segments) < 2 * _MIN_COLUMN_LINES:
        return None
    left_edge = min(segment.x0 for segment in segments)
    right_edge = max(segment.x1 for segment in segments)
    width = right_edge - left_edge
    if width < 4 * _MIN_GUTTER:
        return None
    tolerance = max(1, len(lines) // 20)  # a few full-width lines (title, footer) may cross it
    best = _widest_free_strip(segments, left_edge, width, tolerance=tolerance)
    if best is None or best[1] - best[0] < _MIN_GUTTER:
        return None
    gutter = (left_edge + best[0], left_edge + best[1])
    return gutter if _splits_columns(lines, segments, gutter) else None


def _widest_free_strip(
    segments: list[Segment], left_edge: float, width: float, *, tolerance: int
) -> tuple[int, int] | None:
    """The widest run of points, in the middle reach of the width, that at most ``tolerance``
    segments cover (offsets from ``left_edge``)."""
    bins = int(width) + 2
    coverage = _coverage_steps(segments, left_edge, bins)
    running = 0
    low, high = int(width * _GUTTER_REACH[0]), int(width * _GUTTER_REACH[1])
    best: tuple[int, int] | None = None
    start = None
    for point in range(bins):
        running += coverage[point]
        free = running <= tolerance and low <= point <= high
        if free and start is None:
            start = point
        if (not free or point == high) and start is not None:
            best = _wider(best, (start, point))
            start = None
    return best


def _coverage_steps(segments: list[Segment], left_edge: float, bins: int) -> list[int]:
    """How many segments cover each point of the width, as a difference array (one bin a point)."""
    coverage = [0] * (bins + 1)
    for segment in segments:
        coverage[max(0, int(segment.x0 - left_edge))] += 1
        coverage[min(bins, int(segment.x1 - left_edge) + 1)] -= 1
    return coverage


def _wider(best: tuple[int, int] | None, strip: tuple[int, int]) -> tuple[int, int]:
    """``strip`` if it is wider than ``best`` (the first of two as wide stays)."""
    if best is None or strip[1] - strip[0] > best[1] - best[0]:
        return strip
    return best


def _splits_columns(lines: list[list[Segment]], segments: list[Segment], gutter: tuple[float, float]) -> bool:
    """Prose on both sides of ``gutter``, side by side: two columns, not a table."""
    left = [s for s in segments if s.x1 <= gutter[0] + 1]
    right = [s for s in segments if s.x0 >= gutter[1] - 1]
    if _shorter_column_lines(lines, gutter) < _MIN_COLUMN_LINES:
        return False
    if min(_median_words(left), _median_words(right)) < _MIN_COLUMN_WORDS:
        return False  # short cells on both sides: a table, read row by row
    return _side_by_side(left, right)


def _shorter_column_lines(lines: list[list[Segment]], gutter: tuple[float, float]) -> int:
    """How many lines reach into the column with fewer of them."""
    left_lines = sum(1 for line in lines if any(s.x1 <= gutter[0] + 1 for s in line))
    right_lines = sum(1 for line in lines if any(s.x0 >= gutter[1] - 1 for s in line))
    return min(left_lines, right_lines)


def _side_by_side(left: list[Segment], right: list[Segment]) -> bool:
    """Side by side, not one above the other."""
    overlap = min(max(s.top for s in left), max(s.top for s in right)) - max(
        min(s.bottom for s in left), min(s.bottom for s in right)
    )
    return overlap > 0


def _median_words(segments: list[Segment]) -> float:
    return statistics.median(len(segment.text.split()) for segment in segments) if segments else 0.0


def _read_columns(lines: list[list[Segment]], gutter: tuple[float, float]) -> list[TextLine]:
    """Band by band between full-width lines: the left column's lines, then the right one's."""
    ordered: list[TextLine] = []
    left: list[list[Segment]] = []
    right: list[list[Segment]] = []

    def flush() -> None:
        ordered.extend(_join(part) for part in left)
        ordered.extend(_join(part) for part in right)
        left.clear()
        right.clear()

    for line in lines:
        if _crosses(line, gutter):
            flush()
            ordered.append(_join(line))
            continue
        left_part, right_part = _sides(line, gutter)
        if left_part:
            left.append(left_part)
        if right_part:
            right.append(right_part)
    flush()
    return ordered


def _crosses(line: list[Segment], gutter: tuple[float, float]) -> bool:
    """A full-width line: a segment of it reaches into the gutter."""
    return any(s.x0 < gutter[1] - 1 and s.x1 > gutter[0] + 1 for s in line)


def _sides(line: list[Segment], gutter: tuple[float, float]) -> tuple[list[Segment], list[Segment]]:
    return [s for s in line if s.x1 <= gutter[0] + 1], [s for s in line if s.x0 >= gutter[1] - 1]


@dataclass(frozen=True, slots=True)
class PdfBookmark:
    """A bookmark of the PDF's outline."""

    level: int  # 0 = top
    title: str
    page_index: int  # 0-based
    y: float | None  # where on the page it points (PDF coordinates), if it says


@dataclass
class PdfPage:
    height: float
    lines: list[TextLine]  # in reading order
    ink_chars: int = 0
    blank: bool = False  # nothing at all is drawn on it (no text, picture or path): nothing to OCR


@dataclass
class PdfLayout:
    """What a PDF reader yields: every page's lines, and the outline."""

    pages: list[PdfPage]
    outline: list[PdfBookmark]
