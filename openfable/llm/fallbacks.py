"""A tally of the ways LLM steps fell back, per process: what a real model's bad days cost.

Every step that survives an unusable model answer counts it here, by kind, so a test against a
real model, or ``bench-cost``, can say how often each fallback ran, not only that the step
completed. The counts are per process (the worker's are its own) and only ever grow; read
:func:`fallback_counts` before and after the work and take the difference (:func:`counts_since`).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from enum import StrEnum


class Fallback(StrEnum):
    FORMAT_REFUSED = "format_refused"  # the server refused a response_format: asked again with the next
    INVALID_JSON = "invalid_json"  # the answer was not the JSON asked for
    EMPTY_ANSWER = "empty_answer"  # the answer was empty
    TIMEOUT = "timeout"  # one request got no answer in time (retried, or the call gave up)
    WRONG_IDS = "wrong_ids"  # ids the model invented (not in the outline it was shown), dropped
    CUT_OFF_READ = "cut_off_read"  # an answer cut off at its length bound: its complete items were read
    WRONG_SHAPE = "wrong_shape"  # JSON, but not the shape asked for: the retrieval path failed
    NO_PICKS = "no_picks"  # "llm" mode, and the LLM picked nothing it was shown: the vector paths chose
    TEMPLATE_TOKENS = "template_tokens"  # chat-template tokens cut from a title or summary
    TREE_REASK = "tree_reask"  # the tree builder asked again with the validation error
    TREE_STRUCTURAL = "tree_structural"  # the tree builder gave up: the structural builder ran
    PATH_FAILED = "path_failed"  # an LLM retrieval path failed: the vector path carried the query


_lock = threading.Lock()
_counts: Counter[str] = Counter()


def count_fallback(kind: Fallback, times: int = 1) -> None:
    if times <= 0:
        return
    with _lock:
        _counts[kind.value] += times


def fallback_counts() -> dict[str, int]:
    """Every kind with its count so far in this process (0 for those that never ran)."""
    with _lock:
        return {kind.value: _counts[kind.value] for kind in Fallback}


def counts_since(before: Mapping[str, int]) -> dict[str, int]:
    """What was counted since ``before`` (an earlier :func:`fallback_counts`)."""
    now = fallback_counts()
    return {kind: now[kind] - before.get(kind, 0) for kind in now}
