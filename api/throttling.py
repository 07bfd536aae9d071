"""Request rates per user: OPENFABLE_API_THROTTLE_RATE for everyone, OPENFABLE_API_THROTTLE_RATES
("alice=100/minute,ci-bot=10/second") for named users. Counted in the default cache."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.throttling import UserRateThrottle


class PerUserRateThrottle(UserRateThrottle):
    def allow_request(self, request: Any, view: Any) -> bool:
        user = getattr(request, "user", None)
        override = (
            settings.API_THROTTLE_RATES.get(user.get_username()) if user and user.is_authenticated else None
        )
        if override:
            self.rate = override
            self.num_requests, self.duration = self.parse_rate(override)
        return super().allow_request(request, view)
