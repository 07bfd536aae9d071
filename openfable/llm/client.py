"""The client: one structured JSON completion (or many at once) through litellm.

See the package docstring (``openfable.llm``) for what it does about timeouts, retries, the
response formats a server takes, the cool-down after repeated failures, and the cache.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from openfable.llm.cache import CACHE_KEY_PREFIX, FORMAT_KEY_PREFIX, CacheLike, DatabaseLLMCache
from openfable.llm.calls import LLMRequest, LLMResult
from openfable.llm.config import LLMConfig
from openfable.llm.errors import (
    LLMCoolingDownError,
    LLMError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailableError,
)
from openfable.llm.fallbacks import Fallback, count_fallback
from openfable.llm.json_output import parse_json_output
from openfable.llm.litellm_setup import PLACEHOLDER_API_KEY, import_litellm, litellm_model_name
from openfable.llm_endpoints import (
    FORMATS,
    CoolDown,
    CoolingDown,
    Endpoint,
    ResponseFormat,
    counts_against_endpoint,
    endpoint_for,
    next_format,
    rejects_response_format,
    response_format_for,
    with_schema_instruction,
)
from openfable.retry import call_with_retries, describe_failure, is_timeout, is_transient, status_code_of

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Request:
    """One call's request, as :meth:`LLMClient.complete_json` received it."""

    messages: Sequence[Mapping[str, Any]]
    schema: dict[str, Any]
    schema_name: str
    purpose: str
    max_tokens: int | None
    prompt_schema: dict[str, Any]  # the schema as the prompt spells it when the server does not enforce one


class LLMClient:
    def __init__(self, config: LLMConfig, cache: CacheLike | None = None) -> None:
        if not config.model:
            raise ValueError("LLMConfig.model is empty: set OPENFABLE_LLM_MODEL to use an LLM")
        self.config = config
        self.cache = cache
        # Bounds in-flight requests across every thread using this client, not just one batch.
        self._slots = threading.BoundedSemaphore(max(1, config.max_concurrency))
        self._model_name: str | None = None
        self._context_window: int | None = None

    @classmethod
    def from_settings(cls, *, respect_cooldown: bool = False) -> LLMClient:
        """A client configured from Django settings (``OPENFABLE_LLM_*`` in the environment)."""
        from django.conf import settings

        config = LLMConfig(
            model=getattr(settings, "LLM_MODEL", "") or "",
            base_url=getattr(settings, "LLM_BASE_URL", "") or "",
            api_key=getattr(settings, "LLM_API_KEY", "") or "",
            timeout_s=float(getattr(settings, "LLM_TIMEOUT", 60.0)),
            max_retries=int(getattr(settings, "LLM_MAX_RETRIES", 3)),
            max_concurrency=int(getattr(settings, "LLM_MAX_CONCURRENCY", 4)),
            context_window=int(getattr(settings, "LLM_CONTEXT_WINDOW", 8192)),
            retry_base_delay_s=float(getattr(settings, "LLM_RETRY_BASE_DELAY", 1.0)),
            breaker_threshold=int(getattr(settings, "LLM_BREAKER_THRESHOLD", 3)),
            cooldown_s=float(getattr(settings, "LLM_COOLDOWN_SECONDS", 60.0)),
            temperature=getattr(settings, "LLM_TEMPERATURE", None),
            respect_cooldown=respect_cooldown,
        )
        return cls(config, DatabaseLLMCache())

    @property
    def model_name(self) -> str:
        """The model string handed to litellm."""
        if self._model_name is None:
            self._model_name = litellm_model_name(self.config.model, self.config.base_url)
        return self._model_name

    @property
    def endpoint(self) -> Endpoint:
        """What this process has learned about the model at its base URL (shared by clients)."""
        return endpoint_for(
            self.model_name,
            self.config.base_url,
            threshold=self.config.breaker_threshold,
            cooldown_s=self.config.cooldown_s,
        )

    def cooldown(self) -> CoolDown | None:
        """The cool-down in force for this endpoint, or None when calls may go out."""
        return self.endpoint.breaker.cooldown()

    def context_window(self) -> int:
        """Input tokens the model accepts: litellm's model map, else the configured fallback."""
        if self._context_window is None:
            litellm = import_litellm()
            window: int | None = None
            try:
                info = litellm.get_model_info(self.model_name)
                window = info.get("max_input_tokens") or info.get("max_tokens")
            except Exception:  # litellm raises for models it has no entry for
                window = None
            self._context_window = int(window) if window else self.config.context_window
        return self._context_window

    def complete_json(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        schema: dict[str, Any],
        schema_name: str,
        purpose: str,
        max_tokens: int | None = None,
        prompt_schema: dict[str, Any] | None = None,
    ) -> LLMResult:
        """One chat completion constrained to ``schema``, parsed.

        ``prompt_schema``: the schema as the prompt spells it out for a server that does not
        enforce ``schema`` (default: ``schema`` itself); a shorter equivalent where ``schema``
        repeats what the prompt already shows (the ids an outline offers, as an ``enum``).

        Raises LLMOutputError (unparseable answer), LLMUnavailableError (transient failures
        outlived the retries) or LLMRequestError (rejected request).
        """
        key = self.cache_key(messages, schema)
        hit = self._cache_get(key)
        if hit is not None and "error" not in hit:
            logger.debug("LLM %s: cache hit", purpose)
            return LLMResult(
                data=hit["data"],
                text=hit["text"],
                prompt_tokens=0,
                completion_tokens=0,
                cost_usd=0.0,
                cached=True,
            )
        if hit is not None and self.config.temperature == 0 and hit.get("max_tokens") == max_tokens:
            # Sampled otherwise, or asked with another cap (an answer cut off at one cap can
            # finish under a larger one): ask again.
            logger.debug("LLM %s: cache hit (an answer that failed validation)", purpose)
            raise LLMOutputError(
                hit["error"],
                purpose=purpose,
                text=hit["text"],
                finish_reason=hit.get("finish_reason"),
                cached=True,
            )

        started = time.monotonic()
        request = _Request(messages, schema, schema_name, purpose, max_tokens, prompt_schema or schema)
        response = self._call(request)
        choice = response.choices[0] if response.choices else None
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        finish_reason = getattr(choice, "finish_reason", None)
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = self._cost(response)
        logger.info(
            "LLM %s: %d+%d tokens, $%.6f, %.2f s",
            purpose,
            prompt_tokens,
            completion_tokens,
            cost,
            time.monotonic() - started,
        )
        try:
            data = parse_json_output(text, schema)
        except ValueError as exc:
            count_fallback(Fallback.INVALID_JSON if text.strip() else Fallback.EMPTY_ANSWER)
            message = f"LLM output for {purpose} is not valid JSON for schema {schema_name!r} ({exc})" + (
                f"; finish_reason={finish_reason}" if finish_reason not in (None, "stop") else ""
            )
            if self.config.temperature == 0:
                # A model sampled at temperature 0 gives this answer to this prompt every time:
                # keep it, so that the caller's fallback (an answer cut off at its cap is read up
                # to its last item) replays it instead of waiting for the same answer again.
                self._cache_set(
                    key,
                    {
                        "text": text,
                        "error": message,
                        "finish_reason": finish_reason,
                        "max_tokens": max_tokens,
                    },
                )
            raise LLMOutputError(
                message,
                purpose=purpose,
                text=text,
                finish_reason=finish_reason,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost_usd=cost,
            ) from exc
        self._cache_set(key, {"data": data, "text": text})
        return LLMResult(
            data=data,
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=cost,
            cached=False,
        )

    def complete_json_many(self, requests: Sequence[LLMRequest]) -> list[LLMResult | Exception]:
        """Run independent calls concurrently; results (or the exception) in request order."""
        if not requests:
            return []

        def run(request: LLMRequest) -> LLMResult | Exception:
            try:
                return self.complete_json(
                    request.messages,
                    schema=request.schema,
                    schema_name=request.schema_name,
                    purpose=request.purpose,
                    max_tokens=request.max_tokens,
                )
            except Exception as exc:  # one failed call must not sink its siblings
                return exc

        workers = min(max(1, self.config.max_concurrency), len(requests))
        if workers == 1:
            return [run(r) for r in requests]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm") as pool:
            return list(pool.map(run, requests))

    def cache_key(self, messages: Sequence[Mapping[str, Any]], schema: Mapping[str, Any]) -> str:
        payload = json.dumps(
            {"model": self.model_name, "messages": list(messages), "schema": schema},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
            default=str,
        )
        return CACHE_KEY_PREFIX + hashlib.sha256(payload.encode()).hexdigest()

    # -- internals -------------------------------------------------------------------------------

    def _call(self, request: _Request) -> Any:
        endpoint = self.endpoint
        known = self._known_format(endpoint)
        if known is not None:
            return self._admitted_call(endpoint, known, request)
        # The first call finds out which format the endpoint takes; calls made meanwhile wait for
        # its verdict instead of each spending a request on a format that may be refused.
        with endpoint.probe_lock:
            return self._admitted_call(endpoint, self._known_format(endpoint) or "json_schema", request)

    def _admitted_call(self, endpoint: Endpoint, kind: ResponseFormat, request: _Request) -> Any:
        """The call through the endpoint's circuit breaker, stepping down the response formats
        while the server refuses them."""
        try:
            admission = endpoint.breaker.admit() if self.config.respect_cooldown else "closed"
        except CoolingDown as cooling:
            raise self._cooling_down(request, cooling, attempts=0) from None
        policy = self.config.retry_policy
        if admission == "trial":  # the first call after a cool-down: its one answer decides
            policy = dataclasses.replace(policy, max_retries=0)
        sent = 0

        def attempt(kwargs: dict[str, Any]) -> Any:
            nonlocal sent
            # A retry waits its turn like a new call: once the endpoint cools down (these very
            # failures may have started it), a caller that respects it stops here.
            if sent and self.config.respect_cooldown and (cooldown := endpoint.breaker.cooldown()):
                raise CoolingDown(cooldown)
            sent += 1
            return self._attempt(endpoint, kwargs)

        try:
            while True:
                try:
                    response = call_with_retries(
                        functools.partial(attempt, self._request_kwargs(kind, request)),
                        policy=policy,
                        what=f"LLM {request.purpose} ({self.model_name})",
                    )
                except CoolingDown as cooling:
                    raise self._cooling_down(request, cooling, attempts=sent) from None
                except Exception as exc:
                    lower = next_format(kind)
                    if lower is None or not rejects_response_format(exc):
                        raise self._map_error(exc, request.purpose, attempts=sent) from exc
                    self._learn_format(endpoint, lower, refused=kind, error=exc)
                    count_fallback(Fallback.FORMAT_REFUSED)
                    kind, sent = lower, 0
                    continue
                if endpoint.response_format is None:
                    endpoint.response_format = kind  # it works: later calls need not probe
                return response
        finally:
            if admission == "trial":
                endpoint.breaker.end_trial()

    def _cooling_down(self, request: _Request, cooling: CoolingDown, *, attempts: int) -> LLMCoolingDownError:
        what = f"gave up after {attempts} attempts" if attempts else "not made"
        return LLMCoolingDownError(
            f"LLM call for {request.purpose} to {self.model_name} {what}: {cooling}",
            purpose=request.purpose,
            cooldown=cooling.cooldown,
            attempts=attempts,
        )

    def _attempt(self, endpoint: Endpoint, kwargs: dict[str, Any]) -> Any:
        """One request; its outcome goes to the endpoint's circuit breaker."""
        litellm = import_litellm()
        with self._slots:
            try:
                response = litellm.completion(**kwargs)
            except Exception as exc:
                if is_timeout(exc):
                    count_fallback(Fallback.TIMEOUT)
                if counts_against_endpoint(exc):
                    endpoint.breaker.record_failure(describe_failure(exc, timeout_s=self.config.timeout_s))
                raise
        endpoint.breaker.record_success()
        return response

    def _request_kwargs(self, kind: ResponseFormat, request: _Request) -> dict[str, Any]:
        messages = [dict(m) for m in request.messages]
        if kind != "json_schema":  # the schema is no longer enforced by the server: spell it out
            messages = with_schema_instruction(
                messages, schema=request.prompt_schema, name=request.schema_name
            )
        kwargs: dict[str, Any] = {
            "model": self.model_name,
            "messages": messages,
            "timeout": self.config.timeout_s,
            "max_retries": 0,  # the openai SDK would otherwise retry twice on its own
            # Drop parameters a provider does not support (e.g. temperature on reasoning models)
            # instead of failing; parse_json_output copes with free-form JSON answers.
            "drop_params": True,
        }
        response_format = response_format_for(kind, schema=request.schema, name=request.schema_name)
        if response_format is not None:
            kwargs["response_format"] = response_format
        if self.config.base_url:
            kwargs["api_base"] = self.config.base_url
            kwargs["api_key"] = self.config.api_key or PLACEHOLDER_API_KEY
        elif self.config.api_key:
            kwargs["api_key"] = self.config.api_key
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        return kwargs

    def _map_error(self, exc: Exception, purpose: str, *, attempts: int) -> LLMError:
        summary = describe_failure(exc, timeout_s=self.config.timeout_s)
        if is_transient(exc):
            return LLMUnavailableError(
                f"LLM call for {purpose} to {self.model_name} failed after {attempts} attempts: {summary}",
                purpose=purpose,
                attempts=attempts,
            )
        return LLMRequestError(
            f"LLM call for {purpose} to {self.model_name} was rejected: {summary}",
            purpose=purpose,
            status_code=status_code_of(exc),
        )

    # -- the response format an endpoint takes ---------------------------------------------------

    def _known_format(self, endpoint: Endpoint) -> ResponseFormat | None:
        """What this process learned, else what another process stored, else None."""
        if endpoint.response_format is None:
            endpoint.response_format = self._load_format()
        return endpoint.response_format

    def _learn_format(
        self, endpoint: Endpoint, kind: ResponseFormat, *, refused: ResponseFormat, error: Exception
    ) -> None:
        endpoint.response_format = kind
        reason = describe_failure(error, timeout_s=self.config.timeout_s)
        logger.warning(
            "LLM %s at %s refuses response_format %s; asking with %s from now on (%s)",
            self.model_name,
            self.config.base_url or "its provider",
            refused,
            kind,
            reason,
        )
        if self.cache is None:
            return
        value = {"response_format": kind, "refused": refused, "reason": reason, "learned_at": time.time()}
        try:
            self.cache.set(self._format_key(), value)
        except Exception:  # the process still knows; other processes will learn it themselves
            logger.warning("storing the LLM response format failed", exc_info=True)

    def _load_format(self) -> ResponseFormat | None:
        if self.cache is None:
            return None
        try:
            value = self.cache.get(self._format_key())
        except Exception:
            logger.warning("LLM response format lookup failed", exc_info=True)
            return None
        kind = value.get("response_format") if isinstance(value, dict) else None
        return kind if kind in FORMATS else None

    def _format_key(self) -> str:
        endpoint = f"{self.model_name}\x00{self.config.base_url}"
        return FORMAT_KEY_PREFIX + hashlib.sha256(endpoint.encode()).hexdigest()

    def _cost(self, response: Any) -> float:
        litellm = import_litellm()
        try:
            return float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception:  # unknown models (local servers) have no price: cost them at zero
            return 0.0

    def _cache_get(self, key: str) -> dict[str, Any] | None:
        if self.cache is None:
            return None
        try:
            value = self.cache.get(key)
        except Exception:  # a broken cache (e.g. database down) must not stop the LLM path
            logger.warning("LLM cache read failed", exc_info=True)
            return None
        if isinstance(value, dict) and "text" in value and ("data" in value or "error" in value):
            return value
        return None

    def _cache_set(self, key: str, value: dict[str, Any]) -> None:
        if self.cache is None:
            return
        try:
            self.cache.set(key, value)
        except Exception:
            logger.warning("LLM cache write failed", exc_info=True)
