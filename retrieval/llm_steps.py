"""What one LLM path of a query did (LLMselect, LLMnavigate), as a value: its scores, its report,
the notes it adds and the LLM usage it spent. Both levels of ``retrieve()`` build theirs here.

An LLM failure never fails a query: the step reports it and the vector paths carry the answer.
A failure of the service itself (``llm_down``) keeps later LLM steps of the same query from
calling it; while the endpoint cools down (``openfable.llm_endpoints``) no step is tried at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from openfable.llm import Fallback, LLMClient, LLMUsage, count_fallback
from retrieval.paths import llm as llm_paths
from retrieval.result import PathReport

COOLDOWN_DETAIL = "cooldown_remaining_s"  # in an LLM path's detail: it was held back by a cool-down


@dataclass(frozen=True)
class LLMStep:
    report: PathReport
    scores: Mapping[int, float] | None = None  # None: failed or not tried
    offered: frozenset[int] = frozenset()  # the ids its outline showed the LLM
    notes: tuple[str, ...] = ()
    usage: LLMUsage = field(default_factory=LLMUsage)
    llm_down: str = ""  # the LLM service failed: later LLM steps of this query are not tried
    cooling: bool = False  # not tried: the endpoint is cooling down


def outcome_step(name: str, outcome: llm_paths.LLMPathOutcome, outline: llm_paths.Outline) -> LLMStep:
    """An LLM path's outcome as a step: its scores, or None when it failed (a failure of the
    service also stops later LLM steps of this query)."""
    detail = {
        "outline_tokens": outline.tokens,
        "outline_omitted": outline.omitted,
        "prompt_tokens": outcome.prompt_tokens,
    }
    if outcome.failed:
        count_fallback(Fallback.PATH_FAILED)
        reason = f"LLM call failed: {outcome.error} — fell back to the vector path"
        return LLMStep(
            report=PathReport(name, ran=True, failed=True, reason=reason, detail=detail),
            notes=(f"{name}: {reason}",),
            usage=outcome.usage,
            llm_down=outcome.error if outcome.service_failed else "",
        )
    notes = []
    if outcome.dropped_ids:
        notes.append(f"{name}: dropped {outcome.dropped_ids} id(s) the LLM invented.")
    if outline.omitted:
        notes.append(f"{name}: {outline.omitted} outline entries left out to stay within the prompt cap.")
    report = PathReport(
        name, ran=True, candidates=len(outcome.scores), dropped_ids=outcome.dropped_ids, detail=detail
    )
    return LLMStep(
        report=report,
        scores=outcome.scores,
        offered=outcome.offered,
        notes=tuple(notes),
        usage=outcome.usage,
    )


def cooldown_step(name: str, client: LLMClient, *, noted: bool) -> LLMStep | None:
    """The step of a path not tried because the LLM endpoint is cooling down after repeated
    failures (no request is made); None when it is not. ``noted``: an earlier step of this query
    said so already (one note for the query, however many LLM steps it skips)."""
    cooldown = client.cooldown()
    if cooldown is None:
        return None
    reason = f"LLM {cooldown.describe()} — the vector paths answer meanwhile"
    detail = {COOLDOWN_DETAIL: round(cooldown.remaining_s, 1), "failed_requests": cooldown.failures}
    notes = () if noted else (f"LLM paths not tried: the LLM is {cooldown.describe()}.",)
    return LLMStep(
        report=PathReport(name, ran=False, reason=reason, detail=detail), notes=notes, cooling=True
    )
