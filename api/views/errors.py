"""The JSON answer for a path under /v1/api/ that names no endpoint (``/v1/api/documents/abc``,
``/v1/api/nope``): the API's error shape, as every other answer of the API, not the site's 404 page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from openfable.errors import NotFoundError


@csrf_exempt  # any method: a POST to a path that does not exist is a 404, not a CSRF refusal
def not_found(request: HttpRequest, path: str = "") -> HttpResponse:
    error = NotFoundError(
        f"There is no endpoint {request.path!r}. Ids are whole numbers; the endpoints are listed "
        "in the schema at /v1/api/schema/ (and at /docs).",
        details={"path": request.path},
    )
    return JsonResponse(error.to_dict(), status=error.status)
