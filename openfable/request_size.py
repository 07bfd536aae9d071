"""Request bodies over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` answered with 413 in words.

Django refuses such a body with ``RequestDataTooBig`` only when something reads it, and then as a
bare "Bad Request (400)" page, even under /v1/api/. This middleware refuses it first, from the
size the client declared (or, under ASGI, the size received: a chunked body declares none), with
the JSON error shape under /v1/api/ and the error page elsewhere; before the session, CSRF and
authentication, so an over-size body costs nothing more.

Under ASGI, Django reads the whole body before any middleware runs: ten files of 45 MB took 36 s
to arrive before they were refused. ``BodyLimit`` sits in front of Django's ASGI handler
(``mcp_server.asgi.with_mcp`` puts it there): a body whose ``Content-Length`` is over the limit is
not read at all, Django gets an empty one and this middleware refuses it from the declared size;
a chunked body is read only until it passes the limit.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

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
    return _limit_for(request.content_type or "")


def _limit_for(content_type: str) -> int | None:
    """A multipart upload carries files as they are, streamed to disk: up to ten at
    OPENFABLE_MAX_FILE_BYTES (``MULTIPART_MAX_BYTES``); any other body is read into memory."""
    if content_type.strip().lower().startswith("multipart/") and settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
        return int(settings.MULTIPART_MAX_BYTES)
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]
_ASGIApp = Callable[[MutableMapping[str, Any], _Receive, _Send], Awaitable[None]]
_END_OF_BODY: _Message = {"type": "http.request", "body": b"", "more_body": False}


class BodyLimit:
    """ASGI: hand Django no more of a request body than ``RequestSizeMiddleware`` lets through."""

    def __init__(self, app: _ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        limit = _limit_for(headers.get(b"content-type", b"").decode("latin-1"))
        if limit is None:
            await self.app(scope, receive, send)
            return
        declared = _declared_length(headers.get(b"content-length"))
        if declared is not None and declared > limit:
            # Not a byte of it is read: Django sees the declared length and an empty body, and
            # RequestSizeMiddleware answers 413 from the length.
            await self.app(scope, _no_more(_END_OF_BODY), send)
            return
        await self.app(scope, _capped(receive, limit), send)


def _declared_length(raw: bytes | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _no_more(first: _Message) -> _Receive:
    """A ``receive`` that gives ``first``, then waits: Django listens for the client leaving while
    it answers, and reading the socket for that would read the refused body after all."""
    given = False

    async def receive() -> _Message:
        nonlocal given
        if not given:
            given = True
            return first
        await asyncio.Event().wait()  # cancelled once the answer is sent
        raise AssertionError("unreachable")

    return receive


def _capped(receive: _Receive, limit: int) -> _Receive:
    """``receive``, ending the body once more than ``limit`` bytes came (a chunked body declares
    no length): what came is enough for RequestSizeMiddleware to refuse it."""
    received = 0
    cut = False

    async def capped() -> _Message:
        nonlocal received, cut
        if cut:
            await asyncio.Event().wait()  # as in _no_more: the rest is never read
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit and message.get("more_body", False):
                cut = True
                return {**message, "more_body": False}
        return message

    return capped


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
