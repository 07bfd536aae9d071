"""The sign-in lockout's counting (django-axes, ``AXES_HANDLER``): per username and address, and
per username across every address.

Axes counts failures for the pair (username, client address) and refuses the pair at
``LOGIN_FAILURE_LIMIT``: someone guessing from one address cannot lock the person out elsewhere.
A guesser who changes address on every try (a botnet, or a forged ``X-Forwarded-For`` where one
is trusted) never reaches that limit, so the username across all addresses has a limit of its
own, ``LOGIN_USERNAME_FAILURE_LIMIT``, larger: a few people mistyping from their own machines do
not reach it, and a guesser gets that many tries per cool-off, not unlimited ones.
"""

from __future__ import annotations

from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum


class PairAndUsernameLockoutHandler(AxesDatabaseHandler):
    """Axes' database handler with the username-wide limit beside the pair's."""

    def get_failures(self, request: Any, credentials: dict[str, Any] | None = None) -> int:
        pair = int(super().get_failures(request, credentials))
        username = get_client_username(request, credentials)
        if not username:
            return pair
        attempts = AccessAttempt.objects.filter(username=username)
        if settings.AXES_COOLOFF_TIME is not None:
            attempts = attempts.filter(attempt_time__gte=get_cool_off_threshold(request))
        everywhere = attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0
        if everywhere >= settings.LOGIN_USERNAME_FAILURE_LIMIT:
            # Axes compares one number with one limit: report the username's lockout as the
            # pair's limit reached, so every address is refused until the cool-off ends.
            return max(pair, int(get_failure_limit(request, credentials)))
        return pair
