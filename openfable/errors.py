"""The project's error family: one base, two kinds, and one JSON shape.

``OpenFableError`` is what every surface maps, once: the command line prints
``{"error": ...}`` and exits 1; HTTP answers ``status`` with
``{"error": {"code", "message", "details"}}`` (``openfable.http``); an MCP tool returns it as a
tool error (``mcp_server.tools``). Its message says what was wrong and what to do. Two kinds:

- ``UserInputError`` (4xx): the caller can change something and succeed: bad document text,
  an unknown collection, a budget out of range, an agent's tree that does not validate, an
  embedding model of the wrong size, a refusal (403), too many tries (429), ...
- ``ServiceUnavailableError`` (503): a part the request needs (the database, the model) is not
  answering; the same request may succeed later, nothing the caller sent was wrong.

Pure Python, no Django: the pure ingestion modules raise these too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class OpenFableError(Exception):
    """An error with an answer for people and programs. ``code`` is stable for programs; the
    message is for people. Raise one of the two kinds below, not this."""

    status = 500
    code = "error"

    def __init__(self, message: str, *, code: str | None = None, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.details: dict[str, Any] = dict(details or {})

    @property
    def message(self) -> str:
        return str(self)

    def to_dict(self) -> dict[str, Any]:
        """The body every HTTP surface answers with."""
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class UserInputError(OpenFableError, ValueError):
    """Input a user can fix (a 4xx): the message says what to change."""

    status = 400
    code = "invalid_input"


class ServiceUnavailableError(OpenFableError):
    """A part the request needs (the database, the broker, the model) is not reachable or failed;
    try again later. Not the caller's doing, so not a ``UserInputError``."""

    status = 503
    code = "unavailable"


class NotFoundError(UserInputError):
    """The thing asked for does not exist, or this user may not see it (never say which)."""

    status = 404
    code = "not_found"


class ConflictError(UserInputError):
    """The request is valid but the thing is not in a state that allows it (e.g. indexing)."""

    status = 409
    code = "conflict"


class PermissionDeniedError(UserInputError):
    """The user may see this thing but not do this to it (e.g. a member deleting the owner's collection)."""

    status = 403
    code = "forbidden"


class TooManyAttemptsError(UserInputError):
    """Too many tries in a short time (e.g. failed sign-ins): wait, then try again."""

    status = 429
    code = "too_many_attempts"


class PayloadTooLargeError(UserInputError):
    """The request body is larger than the server reads (``DATA_UPLOAD_MAX_MEMORY_SIZE``)."""

    status = 413
    code = "too_large"
