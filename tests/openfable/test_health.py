"""The health check's own rules: one probe at a time per process, a short cache, every answer bounded.
The probes themselves run against the real parts in tests/faults/test_health_burst.py."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from openfable import health as health_module
from openfable.health import Check, Health, health


@pytest.fixture
def counted_probe(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A probe that takes half a second and counts its runs; no earlier answer."""
    runs: list[float] = []
    running = threading.Lock()

    def probe() -> Health:
        assert running.acquire(blocking=False), "two probes ran at once"
        try:
            runs.append(time.monotonic())
            time.sleep(0.5)
            return Health(checks=[Check("part", True, f"run {len(runs)}", 500.0)])
        finally:
            running.release()

    monkeypatch.setattr(health_module, "_probe", probe)
    monkeypatch.setattr(health_module, "_last", None)
    return runs


def test_a_burst_runs_one_probe_and_every_caller_gets_its_answer(counted_probe: list[float]) -> None:
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=25) as pool:
        answers = list(pool.map(lambda _: health(), range(25)))
    assert len(counted_probe) == 1
    assert {answer.checks[0].detail for answer in answers} == {"run 1"}
    assert time.monotonic() - started < 3


def test_an_answer_is_kept_for_a_few_seconds_then_probed_again(counted_probe: list[float]) -> None:
    first = health()
    assert health() is first and len(counted_probe) == 1
    assert health(max_age=0).checks[0].detail == "run 2", "an older answer is probed again"


def test_a_caller_during_a_probe_gets_the_last_answer_without_waiting(counted_probe: list[float]) -> None:
    health()
    probing = threading.Thread(target=lambda: health(max_age=0))
    probing.start()
    time.sleep(0.1)  # the second probe is under way
    started = time.monotonic()
    assert health(max_age=0).checks[0].detail == "run 1"
    assert time.monotonic() - started < 0.2
    probing.join()
    assert len(counted_probe) == 2
