from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from documents.ingestion.windows import make_windows, merge_boundaries, owned_ranges


def _assert_covering(windows: list[tuple[int, int]], length: int) -> None:
    assert windows[0][0] == 0
    assert windows[-1][1] == length
    for (start, end), (next_start, next_end) in pairwise(windows):
        assert start < next_start <= end < next_end


def test_short_text_is_one_window() -> None:
    assert make_windows("short text", window_chars=100, overlap_chars=10) == [(0, 10)]
    assert make_windows(0, window_chars=100, overlap_chars=10) == [(0, 0)]


def test_length_only_windows_are_regular() -> None:
    assert make_windows(250, window_chars=100, overlap_chars=20) == [(0, 100), (80, 180), (160, 250)]


def test_window_edges_snap_to_whitespace() -> None:
    text = " ".join(f"word{index}" for index in range(300))
    windows = make_windows(text, window_chars=400, overlap_chars=80)
    _assert_covering(windows, len(text))
    for _, end in windows[:-1]:
        assert text[end - 1] == " "
    for start, _ in windows[1:]:
        assert text[start - 1] == " "


def test_paragraph_breaks_preferred_over_spaces() -> None:
    paragraph = ("lorem ipsum " * 8).strip()
    text = "\n\n".join([paragraph] * 10)
    windows = make_windows(text, window_chars=300, overlap_chars=60)
    _assert_covering(windows, len(text))
    assert text[windows[0][1] - 2 : windows[0][1]] == "\n\n"


def test_invalid_window_settings() -> None:
    with pytest.raises(ValueError, match="positive"):
        make_windows(10, window_chars=0, overlap_chars=0)
    with pytest.raises(ValueError, match="half"):
        make_windows(10, window_chars=100, overlap_chars=60)
    with pytest.raises(ValueError, match="negative"):
        make_windows(-1, window_chars=100, overlap_chars=10)


def test_owned_ranges_cut_overlaps_at_midpoints() -> None:
    windows = [(0, 100), (80, 180), (160, 250)]
    assert owned_ranges(windows) == [(0, 90), (90, 170), (170, 250)]


def test_merge_takes_each_side_of_the_midpoint_from_its_window() -> None:
    windows = [(0, 100), (80, 180)]
    # Both windows saw the boundary at 85 (first side) and 95 (second side).
    merged = merge_boundaries(windows, [[0, 40, 85, 95], [80, 85, 95, 150]])
    assert merged == [0, 40, 85, 95, 150]


def test_merge_drops_window_starts_that_are_not_real_boundaries() -> None:
    windows = [(0, 100), (80, 180)]
    # The second window's first marker is its own start (80): the first window owns 80.
    assert merge_boundaries(windows, [[0, 50], [80, 120]]) == [0, 50, 120]


def test_merge_with_adjacent_windows() -> None:
    assert merge_boundaries([(0, 10), (10, 20)], [[0, 5], [10, 15]]) == [0, 5, 10, 15]


def test_merge_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="2 windows but 1 lists"):
        merge_boundaries([(0, 10), (5, 20)], [[0]])
    with pytest.raises(ValueError, match="offset 30 lies outside its window"):
        merge_boundaries([(0, 10), (5, 20)], [[0], [30]])
    with pytest.raises(ValueError, match="does not follow"):
        merge_boundaries([(0, 10), (12, 20)], [[], []])


@st.composite
def _windowed_boundaries(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]], list[list[int]]]:
    window_chars = draw(st.integers(4, 200))
    overlap_chars = draw(st.integers(0, window_chars // 2))
    text: str | int
    if draw(st.booleans()):
        source = draw(st.text(alphabet="ab \n", max_size=1500))
        length, text = len(source), source
    else:
        length = draw(st.integers(0, 1500))
        text = length
    windows = make_windows(text, window_chars=window_chars, overlap_chars=overlap_chars)
    offsets = [
        draw(st.lists(st.integers(start, max(start, end - 1)), max_size=12)) if end > start else []
        for start, end in windows
    ]
    return length, windows, offsets


@settings(max_examples=300, deadline=None)
@given(_windowed_boundaries())
@pytest.mark.slow
def test_property_merged_boundaries_are_ordered_unique_and_cover(
    case: tuple[int, list[tuple[int, int]], list[list[int]]],
) -> None:
    length, windows, offsets = case
    _assert_covering(windows, length)
    ranges = owned_ranges(windows)
    assert ranges[0][0] == 0 and ranges[-1][1] == length
    assert all(left[1] == right[0] for left, right in pairwise(ranges))
    merged = merge_boundaries(windows, offsets)
    assert merged == sorted(set(merged))
    assert all(0 <= offset < max(length, 1) for offset in merged)
    expected = {
        offset
        for (low, high), found in zip(ranges, offsets, strict=True)
        for offset in found
        if low <= offset < high
    }
    assert set(merged) == expected
