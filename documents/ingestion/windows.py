"""Overlapping windows over a long text, and merging the chunk boundaries found in each.

A long document is chunked window by window. Consecutive windows overlap so that a boundary
near a window's edge is seen with context by at least one window.

Merge rule (``merge_boundaries``): each overlap between window k and window k+1 is cut at its
midpoint, ``(start[k+1] + end[k]) // 2``. Window k *owns* the characters from the previous cut
(0 for the first window) up to its own cut (``len`` for the last), and only boundaries inside a
window's owned range are kept. The owned ranges partition the text, so no boundary is counted
twice and none of the text is left to no window; each kept boundary was found by a window that
saw at least half of the overlap as context on either side of the cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

Window = tuple[int, int]

# Break preferences when snapping a window edge: paragraph, line, then any whitespace.
_SEPARATORS = ("\n\n", "\n", " ", "\t")


def make_windows(text: str | int, *, window_chars: int, overlap_chars: int) -> list[Window]:
    """Split ``text`` (or a text length) into overlapping ``(start, end)`` windows.

    Windows cover ``[0, len)``: the first starts at 0, the last ends at the length, starts and
    ends strictly increase and each window overlaps the next by about ``overlap_chars``. Given
    the text itself, window edges move back (by at most a small slack) to a paragraph break,
    line break or space, so a window neither starts nor ends inside a word.
    """
    if window_chars <= 0:
        raise ValueError("window_chars must be positive")
    if not 0 <= overlap_chars <= window_chars // 2:
        raise ValueError("overlap_chars must be between 0 and half of window_chars")
    text_len = text if isinstance(text, int) else len(text)
    if text_len < 0:
        raise ValueError("the text length cannot be negative")
    source = text if isinstance(text, str) else None
    # Snapping may move each edge back by at most `slack`; keeping 2 * slack < window - overlap
    # guarantees every window still advances past the previous one.
    slack = min((window_chars - overlap_chars) // 4, window_chars // 10)
    windows: list[Window] = []
    start = 0
    while True:
        if start + window_chars >= text_len:
            windows.append((start, text_len))
            return windows
        end = _snap(source, start + window_chars, slack)
        windows.append((start, end))
        start = _snap(source, end - overlap_chars, slack) if overlap_chars else end


def owned_ranges(windows: Sequence[Window]) -> list[Window]:
    """The part of the text each window is responsible for under the midpoint rule."""
    _check_windows(windows)
    cuts = [(following[0] + current[1]) // 2 for current, following in pairwise(windows)]
    lows = [windows[0][0], *cuts] if windows else []
    highs = [*cuts, windows[-1][1]] if windows else []
    return list(zip(lows, highs, strict=True))


def merge_boundaries(windows: Sequence[Window], offsets_per_window: Sequence[Sequence[int]]) -> list[int]:
    """Merge absolute boundary offsets found per window into one sorted, duplicate-free list.

    A boundary is kept only if it lies in the range its window owns (see the module docstring),
    so in each overlap the first window decides before the midpoint and the second after it.
    """
    if len(windows) != len(offsets_per_window):
        raise ValueError(f"{len(windows)} windows but {len(offsets_per_window)} lists of offsets")
    merged: list[int] = []
    for (start, end), (low, high), offsets in zip(
        windows, owned_ranges(windows), offsets_per_window, strict=True
    ):
        for offset in offsets:
            if not start <= offset <= end:
                raise ValueError(
                    f"offset {offset} lies outside its window [{start}, {end}); offsets must be absolute"
                )
        merged.extend(sorted({offset for offset in offsets if low <= offset < high}))
    return merged


def _snap(text: str | None, position: int, slack: int) -> int:
    """Move ``position`` back to just after a separator within ``slack`` characters, if any."""
    if text is None or slack <= 0:
        return position
    low = position - slack
    for separator in _SEPARATORS:
        found = text.rfind(separator, low, position)
        if found != -1:
            return found + len(separator)
    return position


def _check_windows(windows: Sequence[Window]) -> None:
    for index, (start, end) in enumerate(windows):
        if start >= end and len(windows) > 1:
            raise ValueError(f"window {index} is empty: [{start}, {end})")
        if not index:
            continue
        previous_start, previous_end = windows[index - 1]
        if not (previous_start < start <= previous_end < end):
            raise ValueError(f"window {index} does not follow window {index - 1} with overlap")
