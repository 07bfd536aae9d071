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
    with ThreadPoolExecutor(max_workers=25) as pool:
        answers = list(pool.map(lambda _: health(), range(25)))
    # One run, and every caller has its answer (one that gave up waiting would say so): no timer
    # needed, which a busy machine could overrun.
    assert len(counted_probe) == 1
    assert {answer.checks[0].detail for answer in answers} == {"run 1"}


def test_an_answer_is_kept_for_a_few_seconds_then_probed_again(counted_probe: list[float]) -> None:
    first = health()
    assert health() is first and len(counted_probe) == 1
    assert health(max_age=0).checks[0].detail == "run 2", "an older answer is probed again"


def test_a_caller_during_a_probe_gets_the_last_answer_without_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs: list[int] = []
    probing, release = threading.Event(), threading.Event()

    def probe() -> Health:
        runs.append(len(runs) + 1)
        if len(runs) == 2:  # the second probe holds until the test lets it go
            probing.set()
            release.wait(30)
        return Health(checks=[Check("part", True, f"run {len(runs)}", 500.0)])

    monkeypatch.setattr(health_module, "_probe", probe)
    monkeypatch.setattr(health_module, "_last", None)
    health()
    second = threading.Thread(target=lambda: health(max_age=0))
    second.start()
    assert probing.wait(30), "the second probe started"
    # Events, not sleeps and timers: the answer comes while the probe is still held, so it did
    # not wait for it (had it waited, it would be "run 2", 30 s later).
    assert health(max_age=0).checks[0].detail == "run 1"
    release.set()
    second.join(30)
    assert runs == [1, 2]
