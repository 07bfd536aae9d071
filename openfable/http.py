"""The HTTP mapping of ``openfable.errors.OpenFableError`` (4xx and 503 alike): one place, one shape.

Pages render ``error.html`` with the error's status and message; requests that want JSON (the
REST API, htmx calls asking for JSON, anything sending ``Accept: application/json``) get
``{"error": {"code", "message", "details"}}``. ``drf_exception_handler`` gives DRF the same shape
for its own errors (validation, authentication, throttling) and for ours.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django_htmx.middleware import HtmxDetails

from openfable.errors import OpenFableError, ServiceUnavailableError, TooManyAttemptsError

logger = logging.getLogger(__name__)
DATABASE_UNAVAILABLE = ServiceUnavailableError(
    "The database is not answering right now. Try again in a moment; nothing was changed.",
    code="database_unavailable",
)

API_PREFIX = "/v1/api/"


def wants_json(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX) or "application/json" in request.headers.get("Accept", "")


def error_response(request: HttpRequest, error: OpenFableError) -> HttpResponse:
    response: HttpResponse
    if wants_json(request):
        response = JsonResponse(error.to_dict(), status=error.status)
    else:
        response = render(request, "error.html", {"error": error}, status=error.status)
    return with_retry_after(response, error)


def with_retry_after(response: HttpResponse, error: OpenFableError) -> HttpResponse:
    """``response`` with the ``Retry-After`` header of ``error``, when it knows one: a 429 or 503
    that knows when to come back says it in the header clients and proxies read."""
    retry_after = error.details.get("retry_after_seconds")
    if isinstance(retry_after, int) and retry_after > 0:
        response["Retry-After"] = str(retry_after)
    return response


class OpenFableErrorMiddleware:
    """Turn an ``OpenFableError`` escaping a view into its answer (4xx or 503), never a 500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, OpenFableError):
            return error_response(request, exception)
        if isinstance(exception, OperationalError):
            # The database is down or restarting: say so fast, as a 503, not a traceback page.
            logger.warning("database unavailable for %s: %s", request.path, exception)
            return error_response(request, DATABASE_UNAVAILABLE)
        if request.path.startswith(API_PREFIX):
            # A bug, not the user's doing: logged with its traceback here (Django's own log of it
            # is skipped once this answers), and the API's JSON shape, not the site's 500 page.
            logger.error("Internal Server Error: %s", request.path, exc_info=exception)
            return api_server_error_response()
        return None


def api_server_error_response() -> HttpResponse:
    body = {
        "error": {
            "code": "server_error",
            "message": "Something went wrong on the server; it is logged. Try again, and report it if it lasts.",
            "details": {},
        }
    }
    return JsonResponse(body, status=500)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: the same JSON for an API path when the error escaped outside a view."""
    from django.views.defaults import server_error as page

    return api_server_error_response() if request.path.startswith(API_PREFIX) else page(request)


def drf_exception_handler(exc: Exception, context: dict[str, Any]) -> Any:
    """DRF's errors and ours in the one JSON shape (used once the REST API exists)."""
    from rest_framework.response import Response
    from rest_framework.views import exception_handler

    if isinstance(exc, OperationalError):
        logger.warning("database unavailable: %s", exc)
        exc = DATABASE_UNAVAILABLE
    if isinstance(exc, OpenFableError):
        return with_retry_after(Response(exc.to_dict(), status=exc.status), exc)
    response = exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    code = getattr(exc, "default_code", "error")
    if isinstance(detail, dict) and set(detail) == {"detail"}:
        message, details = str(detail["detail"]), {}
    else:
        message, details = "The request is not valid; see details for each field.", detail
    response.data = {"error": {"code": str(code), "message": message, "details": details}}
    return response


def login_lockout_response(request: HttpRequest, *args: Any) -> HttpResponse:
    """django-axes' answer to a sign-in refused for too many failures (``AXES_LOCKOUT_CALLABLE``):
    the error page in the app's look, or the JSON shape, with 429. Axes passes the original
    response and the credentials too (positions differ between its sync and async paths); the
    message needs neither."""
    from django.conf import settings

    wait = _duration_text(settings.LOGIN_COOLOFF_SECONDS)
    error = TooManyAttemptsError(
        f"Too many failed sign-ins for this username. Try again in {wait}, "
        "or ask an administrator to unlock it (Admin → Access attempts).",
        details={"retry_after_seconds": settings.LOGIN_COOLOFF_SECONDS},
    )
    response = error_response(request, error)
    response["Retry-After"] = str(settings.LOGIN_COOLOFF_SECONDS)
    return response


def _duration_text(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} hour{'s' if seconds != 3600 else ''}"
    if seconds % 60 == 0:
        return f"{seconds // 60} minute{'s' if seconds != 60 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it (``request.htmx``), for type checking."""

    htmx: HtmxDetails
