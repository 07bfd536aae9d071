"""How an LLM call fails: one base class callers catch to fall back, and what went wrong."""

from __future__ import annotations

from openfable.llm_endpoints import CoolDown


class LLMError(Exception):
    """Base for every failure of an LLM call; callers catch this to fall back."""

    def __init__(self, message: str, *, purpose: str = "") -> None:
        super().__init__(message)
        self.purpose = purpose


class LLMOutputError(LLMError):
    """The model answered, but not with parseable JSON. ``text`` is what it said (to feed back)."""

    def __init__(
        self,
        message: str,
        *,
        purpose: str,
        text: str,
        finish_reason: str | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float = 0.0,
        cached: bool = False,
    ) -> None:
        super().__init__(message, purpose=purpose)
        self.text = text
        self.finish_reason = finish_reason
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.cost_usd = cost_usd
        self.cached = cached  # replayed from the cache: the model was not asked again


class LLMUnavailableError(LLMError):
    """Rate limits, 5xx, timeouts or connection errors persisted through every retry."""

    def __init__(self, message: str, *, purpose: str, attempts: int) -> None:
        super().__init__(message, purpose=purpose)
        self.attempts = attempts


class LLMCoolingDownError(LLMUnavailableError):
    """Recent requests to this endpoint failed: no request is made until the cool-down ends
    (``attempts``: requests this call made before the cool-down began, usually none)."""

    def __init__(self, message: str, *, purpose: str, cooldown: CoolDown, attempts: int = 0) -> None:
        super().__init__(message, purpose=purpose, attempts=attempts)
        self.cooldown = cooldown


class LLMRequestError(LLMError):
    """The service rejected the request (4xx other than 429): retrying would not help."""

    def __init__(self, message: str, *, purpose: str, status_code: int | None) -> None:
        super().__init__(message, purpose=purpose)
        self.status_code = status_code
