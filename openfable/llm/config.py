"""An LLM client's configuration, and whether the settings name a model at all."""

from __future__ import annotations

from dataclasses import dataclass

from openfable.retry import RetryPolicy


@dataclass(frozen=True)
class LLMConfig:
    model: str
    base_url: str = ""
    api_key: str = ""
    timeout_s: float = 60.0
    max_retries: int = 3
    max_concurrency: int = 4
    context_window: int = 8192  # used only when litellm does not know the model
    retry_base_delay_s: float = 1.0
    retry_max_delay_s: float = 30.0
    temperature: float | None = None  # None: the provider's default (some models reject others)
    breaker_threshold: int = 3  # failed requests in a row that start a cool-down (0: never)
    cooldown_s: float = 60.0  # how long the endpoint cools down before one trial call (0: never)
    respect_cooldown: bool = False  # fail at once while cooling down (see the module docstring)

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self.max_retries,
            base_delay_s=self.retry_base_delay_s,
            max_delay_s=self.retry_max_delay_s,
        )


def llm_configured() -> bool:
    """True when settings name an LLM model (otherwise the structural/vector paths run alone)."""
    from django.conf import settings

    return bool(getattr(settings, "LLM_MODEL", ""))
