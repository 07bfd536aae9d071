"""One retry loop for every remote call (LLM completions, remote embeddings).

We retry ourselves instead of using litellm's ``num_retries`` or the openai SDK's ``max_retries``:
those are opaque (they don't say how many attempts were made, and the SDK's default of 2 retries
silently multiplies requests), and one loop here gives every client the same policy:

- retry on 429, 408, any 5xx, timeouts and connection errors;
- never on other 4xx (bad request, auth, unknown model, context window exceeded): repeating them
  cannot help; nor on a 5xx whose message shows it is one of those in disguise (llama-cpp-python
  answers a request that fails its validation, such as an unsupported ``response_format``, with
  HTTP 500 and pydantic's "1 validation error: ..."; some servers report an oversized prompt as a
  500 too);
- exponential backoff with full jitter, capped, honouring a server's ``Retry-After`` up to the cap.

Classification is by duck typing (``status_code`` and exception class names) so this module needs
neither litellm nor openai at import time.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

# Exception class names (anywhere in the MRO) that mean "the service was unreachable or slow",
# from litellm, openai, httpx and the standard library.
_TRANSIENT_CLASS_NAMES = frozenset(
    {
        "Timeout",
        "TimeoutError",
        "TimeoutException",
        "APITimeoutError",
        "APIConnectionError",
        "ConnectError",
        "ConnectionError",
        "ReadError",
        "RemoteProtocolError",
        "RateLimitError",
        "ServiceUnavailableError",
        "BadGatewayError",
        "InternalServerError",
    }
)


_TIMEOUT_CLASS_NAMES = frozenset({"Timeout", "APITimeoutError", "TimeoutException", "TimeoutError"})


# A 5xx whose message says the request itself was wrong: the same request fails the same way.
_PERMANENT_5XX_MESSAGE = re.compile(
    r"\d+ validation errors?\b.*('loc'|\"loc\"|input should|field required|extra inputs)"  # pydantic
    r"|validation errors? for \w+"  # pydantic 1 / FastAPI's older wording
    r"|context[ _]length|context[ _]window|maximum context|exceeds? (the )?(available )?context",
    re.IGNORECASE | re.DOTALL,
)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3  # retries after the first attempt
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0

    def delay_for(self, retry_number: int) -> float:
        """Full-jitter exponential backoff: uniform(0, min(cap, base·2^(n-1))), at least base/2."""
        ceiling = min(self.max_delay_s, self.base_delay_s * (2 ** (retry_number - 1)))
        return max(self.base_delay_s / 2, random.uniform(0, ceiling))


def status_code_of(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    if isinstance(code, int):
        return code
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return code if isinstance(code, int) else None


def is_transient(exc: BaseException) -> bool:
    """True when repeating the same request later may succeed."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    code = status_code_of(exc)
    if code is not None:
        # litellm gives timeouts status 408 and connection errors 500; both are transient.
        if code >= 500 and _PERMANENT_5XX_MESSAGE.search(str(exc)):
            return False
        return code in (408, 429) or code >= 500
    return bool(names & _TRANSIENT_CLASS_NAMES)


def is_timeout(exc: BaseException) -> bool:
    return bool({cls.__name__ for cls in type(exc).__mro__} & _TIMEOUT_CLASS_NAMES)


def describe_failure(exc: BaseException, *, timeout_s: float) -> str:
    """A failed call in one line for people: "no answer within 60 s (timeout)", or its type, HTTP
    status and message (cut at 300 characters)."""
    if is_timeout(exc):
        return f"no answer within {timeout_s:g} s (timeout)"
    code = status_code_of(exc)
    text = str(exc).replace("\n", " ")
    if len(text) > 300:
        text = text[:299] + "…"
    return f"{type(exc).__name__}" + (f" (HTTP {code})" if code else "") + f": {text}"


def retry_after_s(exc: BaseException) -> float | None:
    """The server's Retry-After (seconds form) when the error carries one."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None  # the HTTP-date form is rare from LLM APIs; fall back to our own backoff


def call_with_retries[T](
    fn: Callable[[], T],
    *,
    policy: RetryPolicy,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn`` until it succeeds, a non-transient error occurs, or retries run out.

    The last exception propagates unchanged (with a note saying how many attempts were made), so
    callers can map it to their own error types.
    """
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except Exception as exc:
            if not is_transient(exc):
                if attempt > 1:
                    exc.add_note(f"{what}: failed on attempt {attempt} (not retryable)")
                raise
            if attempt > policy.max_retries:
                exc.add_note(f"{what}: gave up after {attempt} attempts")
                raise
            wait = policy.delay_for(attempt)
            server_wait = retry_after_s(exc)
            if server_wait is not None:
                wait = min(policy.max_delay_s, max(wait, server_wait))
            logger.warning(
                "%s: attempt %d failed (%s: %s); retrying in %.2f s",
                what,
                attempt,
                type(exc).__name__,
                _short(exc),
                wait,
            )
            sleep(wait)


def _short(exc: BaseException, limit: int = 200) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
