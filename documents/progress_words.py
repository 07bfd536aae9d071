"""An ingestion job's progress in words for the corpus page: the stage as a person would say it,
how far it is within that stage, the place in the queue and the time left. Pure: it reads the
values ``documents.selectors.with_latest_job`` pulled from the newest ``IngestionJob``.

The time left is measured, never guessed: the share of the current stage done so far over the
time the stage has run. Before there is such a rate (nothing done yet, or only a moment in),
nothing is said rather than a number that would jump about.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# The share of the progress bar each stage fills (documents.services.jobs.job_progress writes the
# percent with it; a stage with no counts is told by where the percent sits in its band).
STAGE_BANDS: dict[str, tuple[int, int]] = {
    "extracting": (0, 20),
    # A scan's pages read by OCR, once the file has been read (seconds a page, where reading one
    # takes milliseconds): the same share, filled again at the pace of the recognition.
    "recognising": (0, 20),
    "chunking": (20, 35),
    "building_tree": (35, 55),
    "embedding": (55, 95),
    "saving": (95, 99),
}
# A rate from less than this is mostly noise (the first group of a stage).
MIN_SECONDS_FOR_RATE = 3.0

_STAGE_NAMES = {
    "queued": "Waiting to start",
    "extracting": "Reading the file",
    "recognising": "Recognising text",
    "chunking": "Finding sections",
    "building_tree": "Building the tree",
    "embedding": "Embedding passages",
    "saving": "Saving",
    "done": "Done",
}
_FINISHED = {"succeeded": "Done", "failed": "Failed"}


@dataclass(frozen=True)
class ProgressWords:
    stage: str  # "Embedding 120 of 156 passages", "Finding sections · 40 % of this step"
    queue: str  # "2 documents ahead", "next in line"; "" once it runs
    time_left: str  # "about 3 minutes left"; "" until there is a rate
    # The numbers behind the words, for the REST, MCP and CLI job (documents.presenters).
    done: int = 0  # items of the current stage done, of ``total`` (0 of 0: it reports a fraction)
    total: int = 0
    ahead: int | None = None  # unfinished jobs before it in the queue; None once it runs
    seconds_left: float | None = None  # the current stage's, at its measured rate; None: no rate yet


def stage_fraction(*, stage: str, percent: int, done: int, total: int) -> float | None:
    """How much of the current stage is done (0..1): from its counts, else from the percent."""
    if total > 0:
        return max(0.0, min(1.0, done / total))
    band = STAGE_BANDS.get(stage)
    if band is None:
        return None
    low, high = band
    return max(0.0, min(1.0, (percent - low) / (high - low)))


def seconds_left(*, fraction: float | None, elapsed: float) -> float | None:
    """The stage's time left at the rate measured so far; None while there is no rate yet."""
    if fraction is None or fraction <= 0.0 or fraction >= 1.0 or elapsed < MIN_SECONDS_FOR_RATE:
        return None
    return elapsed * (1.0 - fraction) / fraction


def time_left_words(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 45:
        return "less than a minute left"
    minutes = round(seconds / 60)
    if minutes <= 1:
        return "about a minute left"
    if minutes < 90:
        return f"about {minutes} minutes left"
    return f"about {round(minutes / 60)} hours left"


def queue_words(ahead: int) -> str:
    if ahead <= 0:
        return "next in line"
    return f"{ahead} document{'s' if ahead != 1 else ''} ahead"


def stage_words(*, stage: str, done: int, total: int, fraction: float | None) -> str:
    if stage == "embedding" and total > 0:
        return f"Embedding {done} of {total} passages"
    if stage == "extracting" and total > 0:
        return f"Reading the file: page {done} of {total}"
    if stage == "recognising" and total > 0:
        # The page it is on: each takes seconds, so "page 1 of 10" from the moment it begins.
        return f"Recognising text: page {min(done + 1, total)} of {total}"
    name = _STAGE_NAMES.get(stage, stage.replace("_", " ").capitalize())
    if fraction is not None and stage in STAGE_BANDS and 0.0 < fraction < 1.0:
        return f"{name} · {round(fraction * 100)} % of this step"
    return name


def progress_words(
    *,
    status: str | None,
    stage: str | None,
    percent: int | None,
    done: int | None,
    total: int | None,
    stage_started: datetime | None,
    ahead: int | None,
    now: datetime,
) -> ProgressWords:
    """The words for a job: ``status``/``stage`` as stored, ``ahead`` the unfinished jobs created
    before it (any owner's: one queue of workers serves them all)."""
    done, total = done or 0, total or 0
    if status in (None, "queued"):
        return ProgressWords(
            stage="Waiting to start", queue=queue_words(ahead or 0), time_left="", ahead=ahead or 0
        )
    if status in _FINISHED:
        # Nothing left to wait for: no rate, no place in the queue.
        return ProgressWords(stage=_FINISHED[status], queue="", time_left="", done=done, total=total)
    stage = stage or "queued"
    fraction = stage_fraction(stage=stage, percent=percent or 0, done=done, total=total)
    elapsed = (now - stage_started).total_seconds() if stage_started else 0.0
    left = seconds_left(fraction=fraction, elapsed=elapsed)
    return ProgressWords(
        stage=stage_words(stage=stage, done=done, total=total, fraction=fraction),
        queue="",
        time_left=time_left_words(left),
        done=done,
        total=total,
        seconds_left=left,
    )
