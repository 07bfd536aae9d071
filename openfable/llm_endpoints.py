"""What this process has learned about each LLM endpoint (a model at a base URL).

Two things, both keyed by the litellm model name and the base URL, and shared by every
``LLMClient`` of the process (clients are built per query and per job, endpoints are not):

**The response format it takes.** Structured output is asked for with the strictest format first
(``json_schema``). Servers that refuse it say so in different ways: llama-cpp-python validates the
request with pydantic and answers HTTP 500 "1 validation error: ... 'loc': ('body',
'response_format', 'type') ... Input should be 'text' or 'json_object'"; OpenAI answers 400
"Invalid value: 'json_schema'. Supported values are: ..."; others say "not supported".
``rejects_response_format`` recognises these, and the client steps down the ``FORMATS`` ladder:
``json_object`` carrying the schema (llama-cpp-python turns that ``schema`` key into a grammar, so
the output is still constrained), plain ``json_object``, then no ``response_format`` at all. Below
``json_schema`` the schema also goes into the system prompt (``with_schema_instruction``), and the
answer is parsed and validated as before. The first call to an endpoint whose format is unknown
probes alone (``probe_lock``), so a burst of concurrent calls costs one rejected request, not one
each. What was learned is remembered here for the process, and the client also stores it in its
response cache (the database by default), so web and workers share it and a restart keeps it.

**Whether it is cooling down** (``CircuitBreaker``). After ``threshold`` requests in a row failed
in a way that says the service is down or refuses us (connection refused, timeouts, 429, 5xx,
401/403/404), the endpoint cools down for ``cooldown_s`` seconds: callers that respect it (the
query side) fail at once instead of spending their retries on a server that is not answering;
then one trial call (no retries) goes through, and its outcome closes the breaker or starts
another cool-down. Any successful request closes it. This state stays in the process: it changes
with every request, it is about what this process can reach, and a process that has not seen the
failures yet pays for one failed call at most before it cools down too.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from openfable.retry import is_transient, status_code_of

type ResponseFormat = Literal["json_schema", "json_object+schema", "json_object", "none"]

# Strictest first. The client starts at the top and steps down only when a server says no.
FORMATS: tuple[ResponseFormat, ...] = ("json_schema", "json_object+schema", "json_object", "none")

# A rejection must name the response format and say it is not accepted; an "Invalid schema for
# response_format" (OpenAI refusing one schema in strict mode) is not a rejection of the format.
_NAMES_THE_FORMAT = re.compile(r"response_format|json_schema|json_object|response format", re.IGNORECASE)
_SAYS_NOT_ACCEPTED = re.compile(
    r"not supported|unsupported|does not support|doesn't support|only supports?|not available"
    r"|input should be|literal_error|permitted|unexpected value|extra inputs|not allowed"
    r"|invalid value|supported values|must be one of|is not one of|unknown variant|unrecognized",
    re.IGNORECASE,
)
# HTTP statuses a refusal of a request parameter comes with (llama-cpp-python: 500).
_REJECTION_STATUSES = frozenset({400, 415, 422, 500, 501})
# Statuses that say the endpoint refuses us whatever we send: they count towards a cool-down.
_ENDPOINT_REFUSALS = frozenset({401, 403, 404})


def response_format_for(
    kind: ResponseFormat, *, schema: Mapping[str, Any], name: str
) -> dict[str, Any] | None:
    """The ``response_format`` request parameter for ``kind`` (None: send none)."""
    if kind == "json_schema":
        strict = without_length_bounds(schema)
        return {"type": "json_schema", "json_schema": {"name": name, "schema": strict, "strict": True}}
    if kind == "json_object+schema":
        return {"type": "json_object", "schema": schema}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


# Length bounds: a grammar (llama.cpp) ends a string or a list there, but strict structured output
# keeps to a subset of JSON Schema that some providers draw without them, and refuse a schema that
# holds them ("Invalid schema"), which is no refusal of the format: the request would fail, not
# step down to the next format.
_LENGTH_BOUNDS = frozenset({"minItems", "maxItems", "minLength", "maxLength"})


def without_length_bounds(schema: Any) -> Any:
    """``schema`` without its strings' and arrays' length bounds, at every depth."""
    if isinstance(schema, Mapping):
        return {
            key: _properties_without_length_bounds(value)
            if key == "properties"
            else without_length_bounds(value)
            for key, value in schema.items()
            if key not in _LENGTH_BOUNDS
        }
    if isinstance(schema, list):
        return [without_length_bounds(value) for value in schema]
    return schema


def _properties_without_length_bounds(properties: Any) -> Any:
    """An object's properties: their names are data (a property may be called "maxLength")."""
    if not isinstance(properties, Mapping):
        return without_length_bounds(properties)
    return {name: without_length_bounds(value) for name, value in properties.items()}


def next_format(kind: ResponseFormat) -> ResponseFormat | None:
    index = FORMATS.index(kind)
    return FORMATS[index + 1] if index + 1 < len(FORMATS) else None


def with_schema_instruction(
    messages: Sequence[Mapping[str, Any]], *, schema: Mapping[str, Any], name: str
) -> list[dict[str, Any]]:
    """``messages`` with the schema spelled out in the system message (one is added first when
    there is none: many chat templates accept a system message only at the start)."""
    instruction = (
        f'Reply with JSON only, no prose and no code fence, valid against the JSON Schema "{name}":\n'
        + json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    )
    out = [dict(message) for message in messages]
    if out and out[0].get("role") == "system" and isinstance(out[0].get("content"), str):
        out[0]["content"] = f"{out[0]['content']}\n\n{instruction}"
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out


def rejects_response_format(exc: BaseException) -> bool:
    """True when ``exc`` is a server refusing the ``response_format`` it was sent."""
    code = status_code_of(exc)
    if code is not None and code not in _REJECTION_STATUSES:
        return False
    text = str(exc)
    return bool(_NAMES_THE_FORMAT.search(text) and _SAYS_NOT_ACCEPTED.search(text))


def counts_against_endpoint(exc: BaseException) -> bool:
    """A failed request that says the service is down, overloaded or refuses us (see the module
    docstring); a request the service judged and refused (a prompt too long, a bad parameter) does
    not: it says the service is up."""
    if is_transient(exc):
        return True
    return status_code_of(exc) in _ENDPOINT_REFUSALS


# -- the circuit breaker -----------------------------------------------------------------------


@dataclass(frozen=True)
class CoolDown:
    """Why calls to an endpoint are not being made, and until when."""

    remaining_s: float  # seconds until a trial call may go through (0: a trial is under way)
    failures: int  # requests in a row that failed
    last_error: str  # the last of them, in one line

    def describe(self) -> str:
        wait = (
            f"the next try is in {self.remaining_s:.0f} s"
            if self.remaining_s > 0
            else "a trial request is under way"
        )
        return (
            f"cooling down after {self.failures} failed request(s) in a row (last: {self.last_error}); "
            f"{wait} (OPENFABLE_LLM_COOLDOWN_SECONDS)"
        )


class CoolingDown(Exception):
    """Raised by :meth:`CircuitBreaker.admit` while calls are held back."""

    def __init__(self, cooldown: CoolDown) -> None:
        super().__init__(cooldown.describe())
        self.cooldown = cooldown


Admission = Literal["closed", "trial"]


@dataclass
class CircuitBreaker:
    """Consecutive counted failures open it for ``cooldown_s``; then one trial call decides.

    ``threshold`` < 1 or ``cooldown_s`` <= 0 turns it off. ``clock`` is injectable for tests.
    """

    threshold: int
    cooldown_s: float
    clock: Callable[[], float] = time.monotonic
    failures: int = 0
    opened_at: float | None = None
    trial_running: bool = False
    last_error: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def enabled(self) -> bool:
        return self.threshold >= 1 and self.cooldown_s > 0

    def cooldown(self) -> CoolDown | None:
        """The cool-down in force now, without taking the trial slot; None when a call may go."""
        with self._lock:
            return self._cooldown(self.clock())

    def admit(self) -> Admission:
        """Let a call through ("trial": the first after a cool-down), or raise ``CoolingDown``."""
        with self._lock:
            now = self.clock()
            cooldown = self._cooldown(now)
            if cooldown is not None:
                raise CoolingDown(cooldown)
            if self.enabled and self.opened_at is not None:
                self.trial_running = True
                return "trial"
            return "closed"

    def record_success(self) -> None:
        with self._lock:
            self.failures, self.opened_at, self.trial_running, self.last_error = 0, None, False, ""

    def record_failure(self, error: str) -> None:
        with self._lock:
            self.failures += 1
            self.last_error = error
            if self.enabled and self.failures >= self.threshold:
                self.opened_at = self.clock()  # (re)starts the cool-down

    def end_trial(self) -> None:
        """A trial call ended without a verdict (e.g. a 400): let the next call try."""
        with self._lock:
            self.trial_running = False

    def _cooldown(self, now: float) -> CoolDown | None:
        if not self.enabled or self.opened_at is None:
            return None
        remaining = self.opened_at + self.cooldown_s - now
        if remaining > 0 or self.trial_running:
            return CoolDown(max(0.0, remaining), self.failures, self.last_error)
        return None


# -- the registry ------------------------------------------------------------------------------


@dataclass
class Endpoint:
    """One model at one base URL, as this process knows it."""

    model: str
    base_url: str
    breaker: CircuitBreaker
    response_format: ResponseFormat | None = None  # None: not known yet
    probe_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


_endpoints: dict[tuple[str, str], Endpoint] = {}
_registry_lock = threading.Lock()


def endpoint_for(model: str, base_url: str, *, threshold: int, cooldown_s: float) -> Endpoint:
    """The process-wide state of ``model`` at ``base_url`` (the breaker follows the latest
    settings: they may change between calls, in tests at least)."""
    key = (model, base_url)
    with _registry_lock:
        endpoint = _endpoints.get(key)
        if endpoint is None:
            endpoint = Endpoint(model, base_url, CircuitBreaker(threshold, cooldown_s))
            _endpoints[key] = endpoint
        else:
            endpoint.breaker.threshold, endpoint.breaker.cooldown_s = threshold, cooldown_s
        return endpoint


def forget_endpoints() -> None:
    """Forget every learned format and cool-down (tests start from a clean process)."""
    with _registry_lock:
        _endpoints.clear()


__all__ = [
    "FORMATS",
    "CircuitBreaker",
    "CoolDown",
    "CoolingDown",
    "Endpoint",
    "ResponseFormat",
    "counts_against_endpoint",
    "endpoint_for",
    "forget_endpoints",
    "next_format",
    "rejects_response_format",
    "response_format_for",
    "with_schema_instruction",
]
