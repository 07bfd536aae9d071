"""Stage timings of one query: milliseconds per stage, as ``RetrievalResult.timings_ms`` shows them."""

from __future__ import annotations

import time
from collections.abc import Mapping


class Laps:
    """A stopwatch one stage function keeps to itself: ``end(stage)`` adds the time since the
    previous end (or the start) to that stage; ``timings`` is what it measured."""

    def __init__(self, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started
        self.lap = self.started
        self.timings: dict[str, float] = {}

    def end(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round(self.timings.get(stage, 0.0) + (now - self.lap) * 1000, 2)
        self.lap = now

    def add(self, timings: Mapping[str, float]) -> None:
        """Take in what another stage measured (from its own start), and go on from now."""
        for stage, ms in timings.items():
            self.timings[stage] = round(self.timings.get(stage, 0.0) + ms, 2)
        self.lap = time.perf_counter()

    def with_total(self) -> dict[str, float]:
        """The timings, and the milliseconds since the start as "total"."""
        return {**self.timings, "total": round((time.perf_counter() - self.started) * 1000, 2)}
