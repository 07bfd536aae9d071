"""Query parameters read strictly: a value the API cannot read is refused with a 400 that says what
it takes, never quietly replaced by a default (``?wait=maybe`` waiting or not, ``?limit=ten``
answering 50, ``?status=AAA`` answering an empty page). The MCP tools refuse the same values
through their argument types."""

from __future__ import annotations

import re
from collections.abc import Iterable

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request

from openfable.errors import UserInputError

_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}
PAGE_LIMIT_DEFAULT = 50
PAGE_LIMIT_MAX = 500
# PostgreSQL's OFFSET is a bigint: anything larger would reach it as an error, not an empty page.
PAGE_OFFSET_MAX = 2**63 - 1

PAGE_PARAMETERS = [
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": PAGE_LIMIT_MAX},
        description=f"at most this many (1–{PAGE_LIMIT_MAX}; default {PAGE_LIMIT_DEFAULT})",
    ),
    OpenApiParameter(
        "offset",
        {"type": "integer", "minimum": 0, "maximum": PAGE_OFFSET_MAX},
        description="skip this many (the next page)",
    ),
]


def flag_parameter(name: str, description: str) -> OpenApiParameter:
    return OpenApiParameter(name, OpenApiTypes.BOOL, description=f"{description} (true or false)")


def query_flag(request: Request, name: str) -> bool:
    """``?name=true|false`` (also 1/0, yes/no, any case); absent is false, empty is refused."""
    if name not in request.query_params:
        return False
    value = str(request.query_params.get(name)).lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise UserInputError(
        f"{name}: {request.query_params.get(name)!r} is not true or false; send {name}=true or {name}=false.",
        details={"parameter": name},
    )


def query_integer(request: Request, name: str, *, default: int, minimum: int, maximum: int) -> int:
    """``?name=<integer>`` within [minimum, maximum]; absent is ``default``, empty is refused."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"-?[0-9]{1,20}", raw):
        raise UserInputError(
            f"{name}: {raw!r} is not a whole number; send {name}={default}, for example.",
            details={"parameter": name},
        )
    value = int(raw)
    if not minimum <= value <= maximum:
        raise UserInputError(
            f"{name}: {value} is out of range; it takes {minimum} to {maximum}.", details={"parameter": name}
        )
    return value


def query_choice(request: Request, name: str, choices: Iterable[str]) -> str | None:
    """``?name=`` one of ``choices``; absent is ``None``, empty is refused."""
    value = request.query_params.get(name)
    allowed = list(choices)
    if value is not None and value not in allowed:
        raise UserInputError(
            f"{name}: {value!r} is not one of {', '.join(allowed)}.",
            details={"parameter": name, "allowed": allowed},
        )
    return value
