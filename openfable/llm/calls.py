"""One call's request and result, and :class:`LLMUsage`: the one record of calls, tokens and cost
that every LLM step (indexing and retrieval) sums."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from openfable.llm.errors import LLMCoolingDownError, LLMOutputError


@dataclass(frozen=True)
class LLMResult:
    data: Any  # the parsed JSON
    text: str  # the raw assistant message
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cached: bool = False


@dataclass(frozen=True, slots=True)
class LLMUsage:
    """Calls, tokens and cost of LLM steps; sum with :meth:`plus`.

    A cache hit counts as a call (and a cached call) with no tokens and no cost. A failed call
    counts too, with whatever tokens the model spent before the answer turned out unusable.
    """

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    @classmethod
    def of(cls, outcome: LLMResult | BaseException) -> LLMUsage:
        """The usage of one call, from its result or the exception it raised."""
        if isinstance(outcome, LLMResult):
            return cls(
                calls=1,
                cached_calls=int(outcome.cached),
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                cost_usd=outcome.cost_usd,
            )
        if isinstance(outcome, LLMCoolingDownError) and not outcome.attempts:  # no request was made
            return cls()
        if isinstance(outcome, LLMOutputError):  # the model answered: its tokens were paid for
            return cls(
                calls=1,
                cached_calls=int(outcome.cached),
                prompt_tokens=outcome.prompt_tokens,
                completion_tokens=outcome.completion_tokens,
                cost_usd=outcome.cost_usd,
            )
        return cls(calls=1)

    def plus(self, other: LLMUsage) -> LLMUsage:
        return LLMUsage(
            calls=self.calls + other.calls,
            cached_calls=self.cached_calls + other.cached_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
        }


@dataclass(frozen=True)
class LLMRequest:
    """One call for :meth:`LLMClient.complete_json_many`."""

    messages: Sequence[Mapping[str, Any]]
    schema: dict[str, Any]
    schema_name: str
    purpose: str
    max_tokens: int | None = None
