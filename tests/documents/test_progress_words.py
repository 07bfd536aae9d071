"""The progress words and the time-left estimate (pure: no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from documents.progress_words import (
    progress_words,
    queue_words,
    seconds_left,
    stage_fraction,
    time_left_words,
)


def test_the_time_left_comes_from_the_measured_rate() -> None:
    # 120 of 156 in 600 s: 5 s a passage, so the other 36 take 180 s.
    assert seconds_left(fraction=120 / 156, elapsed=600.0) == pytest.approx(180.0)
    assert time_left_words(180.0) == "about 3 minutes left"


@pytest.mark.parametrize(
    ("fraction", "elapsed"),
    [(None, 60.0), (0.0, 60.0), (1.0, 60.0), (0.5, 1.0)],
    ids=["no measure", "nothing done yet", "stage over", "only a moment in"],
)
def test_no_rate_no_estimate(fraction: float | None, elapsed: float) -> None:
    assert seconds_left(fraction=fraction, elapsed=elapsed) is None
    assert time_left_words(seconds_left(fraction=fraction, elapsed=elapsed)) == ""


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (20, "less than a minute left"),
        (70, "about a minute left"),
        (600, "about 10 minutes left"),
        (3 * 3600, "about 3 hours left"),
    ],
)
def test_time_left_in_words(seconds: float, words: str) -> None:
    assert time_left_words(seconds) == words


def test_a_stage_without_counts_is_read_from_its_band_of_the_bar() -> None:
    assert stage_fraction(stage="chunking", percent=20, done=0, total=0) == 0.0
    assert stage_fraction(stage="chunking", percent=35, done=0, total=0) == 1.0
    assert stage_fraction(stage="embedding", percent=62, done=120, total=156) == pytest.approx(120 / 156)


def test_queue_words() -> None:
    assert (queue_words(0), queue_words(1), queue_words(2)) == (
        "next in line",
        "1 document ahead",
        "2 documents ahead",
    )


def test_stage_names_in_words() -> None:
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)

    def words(stage: str, percent: int, done: int = 0, total: int = 0) -> str:
        return progress_words(
            status="running",
            stage=stage,
            percent=percent,
            done=done,
            total=total,
            stage_started=now - timedelta(seconds=1),
            ahead=0,
            now=now,
        ).stage

    assert words("extracting", 0) == "Reading the file"
    assert words("extracting", 6, 3, 10) == "Reading the file: page 3 of 10"
    # OCR takes seconds a page: the page it is reading now, from the moment it begins.
    assert words("recognising", 0, 0, 10) == "Recognising text: page 1 of 10"
    assert words("recognising", 4, 2, 10) == "Recognising text: page 3 of 10"
    assert words("recognising", 20, 10, 10) == "Recognising text: page 10 of 10"
    assert words("chunking", 26) == "Finding sections · 40 % of this step"
    assert words("building_tree", 35) == "Building the tree"
    assert words("embedding", 85, 120, 156) == "Embedding 120 of 156 passages"
    assert words("saving", 95) == "Saving"
    queued = progress_words(
        status="queued", stage="queued", percent=0, done=0, total=0, stage_started=None, ahead=2, now=now
    )
    assert (queued.stage, queued.queue, queued.time_left) == ("Waiting to start", "2 documents ahead", "")
