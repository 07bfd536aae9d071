"""Request rates per user, one count for every surface: the REST API, the MCP tools and the web
pages that run a query or start a process.

OPENFABLE_API_THROTTLE_RATE holds for everyone, OPENFABLE_API_THROTTLE_RATES
("alice=100/minute,ci-bot=10/second") for named users. DRF's throttle keeps the count (a list of
request times per user in the ``rate_limit`` cache, under ``throttle_user_<id>``): the REST API runs it
on every request (``REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]``) and the MCP server on every tool
call (``rate_limit_check``), and so do the web pages that cost as much as an API call: a query
on the query page and a question asked on a document page (``retrieval.views``), and the PDF page
pictures of the document page (``documents.views.document_page_image``: each one not drawn yet
starts a process). A person throttled on one surface is throttled on all of them. Pages that only
show what is stored (the corpus, a document's outline) are not counted: a person reading must not
be locked out by their own script.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from rest_framework.throttling import UserRateThrottle

from openfable.errors import TooManyAttemptsError


class PerUserRateThrottle(UserRateThrottle):
    """DRF's per-user throttle with the per-user rates of OPENFABLE_API_THROTTLE_RATES, counted in
    the ``rate_limit`` cache (shared by every web worker when the broker is Redis)."""

    @property
    def cache(self) -> Any:  # type: ignore[override]
        return caches["rate_limit"]

    def allow_request(self, request: Any, view: Any) -> bool:
        user = getattr(request, "user", None)
        override = (
            settings.API_THROTTLE_RATES.get(user.get_username()) if user and user.is_authenticated else None
        )
        if override:
            self.rate = override
            self.num_requests, self.duration = self.parse_rate(override)
        return super().allow_request(request, view)


@dataclass(frozen=True)
class _Caller:
    """What the throttle reads of a request: the user (an MCP call has no Django request)."""

    user: Any


def rate_limit_check(*, user: Any) -> None:
    """Count one request of ``user``; ``TooManyAttemptsError`` (429, code ``throttled``) saying when
    to try again if that is one too many."""
    throttle = PerUserRateThrottle()
    if throttle.allow_request(_Caller(user=user), None):
        return
    seconds = max(1, math.ceil(throttle.wait() or 1))
    raise TooManyAttemptsError(
        f"Too many requests: {throttle.rate} for you on every surface together (the REST API, MCP, "
        "and the web pages' queries, questions and page pictures). "
        f"Try again in {seconds} second{'s' if seconds != 1 else ''}.",
        code="throttled",
        details={"retry_after_seconds": seconds},
    )
