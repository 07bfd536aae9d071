from __future__ import annotations

from typing import Any

import pytest

from openfable.retry import RetryPolicy, call_with_retries, is_transient, retry_after_s


class StatusError(Exception):
    def __init__(self, status_code: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code
        self.response = type("Response", (), {"headers": headers or {}, "status_code": status_code})()


class APITimeoutError(Exception):  # named like openai's, without a status code
    pass


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (StatusError(429), True),
        (StatusError(408), True),
        (StatusError(500), True),
        (StatusError(503), True),
        (StatusError(400), False),
        (StatusError(401), False),
        (StatusError(404), False),
        (APITimeoutError(), True),
        (ConnectionRefusedError(), True),
        (TimeoutError(), True),
        (ValueError("bad"), False),
    ],
)
def test_is_transient(exc: Exception, transient: bool) -> None:
    assert is_transient(exc) is transient


def run(outcomes: list[Any], policy: RetryPolicy) -> tuple[Any, list[float], int]:
    sleeps: list[float] = []
    calls = 0

    def fn() -> Any:
        nonlocal calls
        outcome = outcomes[calls]
        calls += 1
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    result = call_with_retries(fn, policy=policy, what="test", sleep=sleeps.append)
    return result, sleeps, calls


def test_retries_transient_errors_with_growing_capped_backoff() -> None:
    policy = RetryPolicy(max_retries=5, base_delay_s=0.1, max_delay_s=0.3)
    result, sleeps, calls = run([StatusError(429)] * 5 + ["ok"], policy)
    assert (result, calls) == ("ok", 6)
    assert len(sleeps) == 5
    assert all(0.05 <= s <= 0.3 for s in sleeps)


def test_gives_up_after_max_retries_with_the_last_error() -> None:
    with pytest.raises(StatusError) as caught:
        run([StatusError(500)] * 3, RetryPolicy(max_retries=2, base_delay_s=0.01))
    assert any("gave up after 3 attempts" in note for note in caught.value.__notes__)


def test_does_not_retry_client_errors() -> None:
    with pytest.raises(StatusError):
        run([StatusError(400), "never"], RetryPolicy(max_retries=3, base_delay_s=0.01))


def test_honours_retry_after_up_to_the_cap() -> None:
    assert retry_after_s(StatusError(429, {"retry-after": "2"})) == 2.0
    assert retry_after_s(StatusError(429, {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) is None
    _, sleeps, _ = run([StatusError(429, {"retry-after": "0.2"}), "ok"], RetryPolicy(base_delay_s=0.01))
    assert sleeps == [0.2]
    _, sleeps, _ = run([StatusError(429, {"retry-after": "600"}), "ok"], RetryPolicy(max_delay_s=1.5))
    assert sleeps == [1.5]
