"""The input of ``retrieve()``, checked: every mistake a caller can make raises
``RetrievalInputError`` with a message that says what was wrong and what to do instead."""

from __future__ import annotations

import numpy as np
from django.conf import settings

from openfable.llm import llm_configured
from retrieval.result import MODES, ORDERS, RetrievalInputError

MAX_QUERY_CHARS = 4000
MAX_TOP_K = 100  # chunks one query returns when asked for a count instead of a budget


def clean_query(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise RetrievalInputError("The query is empty. Type what you are looking for.")
    if "\x00" in query:
        # PostgreSQL cannot hold NUL in text: refused here, in words, not as a database error.
        raise RetrievalInputError("The query contains NUL characters; send plain text.")
    query = " ".join(query.split())
    if len(query) > MAX_QUERY_CHARS:
        raise RetrievalInputError(
            f"The query is {len(query):,} characters long; the limit is {MAX_QUERY_CHARS:,}. "
            "Shorten it to the question itself."
        )
    return query


def check_budget(token_budget: object) -> int:
    low, high = settings.TOKEN_BUDGET_MIN, settings.TOKEN_BUDGET_MAX
    if isinstance(token_budget, bool) or not isinstance(token_budget, int):
        raise RetrievalInputError(
            f"The token budget must be a whole number of tokens between {low} and {high}, "
            f"got {token_budget!r}."
        )
    if not low <= token_budget <= high:
        raise RetrievalInputError(
            f"The token budget {token_budget} is outside the accepted range {low}–{high} tokens "
            "(OPENFABLE_TOKEN_BUDGET_MIN / _MAX). Choose a budget in that range."
        )
    return token_budget


def check_embedding(vector: object) -> np.ndarray | None:
    if vector is None:
        return None
    array = np.asarray(vector, dtype=np.float32)
    dimensions = settings.EMBEDDING_DIMENSIONS
    if array.shape != (dimensions,) or not np.all(np.isfinite(array)):
        raise RetrievalInputError(
            f"The query embedding must be {dimensions} finite numbers (OPENFABLE_EMBEDDING_DIMENSIONS), "
            f"got an array of shape {array.shape}."
        )
    return array


def resolve_mode(mode: str | None) -> str:
    if mode is None or (isinstance(mode, str) and not mode.strip()):
        return "bipath" if llm_configured() else "vector"
    mode = mode.strip().lower() if isinstance(mode, str) else mode
    if mode not in MODES:
        raise RetrievalInputError(f"Unknown mode {mode!r}. Use one of: {', '.join(MODES)}.")
    return mode


def check_limits(*, token_budget: object, top_k: object) -> tuple[int, int | None]:
    """The budget a query runs under and the most chunks it returns: a ``token_budget`` (default
    OPENFABLE_TOKEN_BUDGET_DEFAULT), or ``top_k`` chunks instead, packed under the largest budget
    (OPENFABLE_TOKEN_BUDGET_MAX), which stays the hard limit on the text returned."""
    if top_k is None:
        budget = settings.TOKEN_BUDGET_DEFAULT if token_budget is None else token_budget
        return check_budget(budget), None
    if token_budget is not None:
        raise RetrievalInputError(
            "Send token_budget or top_k, not both: a budget returns the best text that fits so many "
            "tokens, top_k the best top_k passages."
        )
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise RetrievalInputError(
            f"top_k must be a whole number of passages between 1 and {MAX_TOP_K}, got {top_k!r}."
        )
    return settings.TOKEN_BUDGET_MAX, top_k


def check_order(order: object) -> str:
    if order is None or order == "":
        return ORDERS[0]
    if order not in ORDERS:
        raise RetrievalInputError(
            f"Unknown order {order!r}. Use 'document' (document rank, then offset: the default) or "
            "'score' (best first)."
        )
    return str(order)
