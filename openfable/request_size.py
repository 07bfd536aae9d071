"""Request bodies over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` answered with 413 in words.

Django refuses such a body with ``RequestDataTooBig`` only when something reads it, and then as a
bare "Bad Request (400)" page, even under /v1/api/. This middleware refuses it first, from the
size the client declared (or, under ASGI, the size received: a chunked body declares none), with
the JSON error shape under /v1/api/ and the error page elsewhere; before the session, CSRF and
authentication, so an over-size body costs nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from openfable.errors import PayloadTooLargeError
from openfable.http import error_response


class RequestSizeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = body_limit(request)
        if limit is not None and (size := _body_size(request)) > limit:
            return error_response(request, too_large(size, limit=limit))
        return self.get_response(request)


def body_limit(request: HttpRequest) -> int | None:
    """A multipart upload carries files as they are, streamed to disk: up to ten at
    OPENFABLE_MAX_FILE_BYTES (``MULTIPART_MAX_BYTES``); any other body is read into memory."""
    if (request.content_type or "").startswith("multipart/") and settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return int(settings.MULTIPART_MAX_BYTES)
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def too_large(size: int, *, limit: int | None = None) -> PayloadTooLargeError:
    if limit is not None and limit != settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return PayloadTooLargeError(
            f"The upload is {size:,} bytes; the server takes at most {limit:,} in one request (ten "
            f"files of OPENFABLE_MAX_FILE_BYTES = {settings.MAX_FILE_BYTES:,} bytes). Send fewer "
            "or smaller files at a time.",
            details={"limit_bytes": limit, "max_file_bytes": settings.MAX_FILE_BYTES},
        )
    limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0)
    return PayloadTooLargeError(
        f"The request body is {size:,} bytes; the server reads at most {limit:,} (room for a document of "
        f"OPENFABLE_MAX_DOCUMENT_BYTES = {settings.MAX_DOCUMENT_BYTES:,} bytes however its JSON is "
        "escaped). Split the document into smaller ones.",
        details={"limit_bytes": limit, "max_document_bytes": settings.MAX_DOCUMENT_BYTES},
    )


def _body_size(request: HttpRequest) -> int:
    try:
        size = int(request.META.get("CONTENT_LENGTH") or 0)
    except (TypeError, ValueError):
        size = 0
    # Under ASGI the body has already arrived in a seekable spooled file (Django reads it before
    # the request exists): its real size counts too, as Django's own check does.
    stream = getattr(request, "_stream", None)
    if stream is not None and stream.seekable():
        position = stream.tell()
        size = max(size, stream.seek(0, os.SEEK_END))
        stream.seek(position)
    return size
