"""The error answers every operation can give, added to the OpenAPI schema in one place (a
drf-spectacular postprocessing hook), so the schema names every status the server returns."""

from __future__ import annotations

from typing import Any

_ERROR = {"$ref": "#/components/schemas/Error"}
_WRITES = {"post", "put", "patch", "delete"}
# Status -> what it means, and which operations can answer it.
_ALWAYS = {
    400: "input to fix (a field, a query parameter); the message says what",
    401: "no or unknown token",
    404: "no such thing, or not yours to see",
    429: "too many requests: wait (Retry-After) and try again",
    503: "a part the request needs (the database) is not answering: try again shortly",
}
_ON_WRITES = {
    403: "signed in, but not allowed to do this (not the owner; a session without its CSRF token)",
    409: "conflicts with the current state (the tree moved on since expected_version; the slug is taken)",
}
_WITH_BODY = {
    413: "the body is larger than the server takes (OPENFABLE_MAX_DOCUMENT_BYTES)",
    415: "the body is not in a media type this operation reads (JSON; multipart for an upload)",
}


# Response fields an answer may leave out (drf-spectacular marks every read-only field required).
_LEFT_OUT = {"Document": {"content"}}  # GET /documents/{id}?meta_only=true


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    components = result.get("components", {}).get("schemas", {})
    for name, fields in _LEFT_OUT.items():
        if name in components:
            components[name]["required"] = [
                f for f in components[name].get("required", []) if f not in fields
            ]
    for operations in result.get("paths", {}).values():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            if not any("bearerAuth" in requirement for requirement in operation.get("security", [])):
                continue  # the health check: no token, no throttle; its 503 is its own
            codes = dict(_ALWAYS)
            if method in _WRITES:
                codes.update(_ON_WRITES)
            if "requestBody" in operation:
                codes.update(_WITH_BODY)
            for code, description in sorted(codes.items()):
                operation["responses"].setdefault(
                    str(code),
                    {"content": {"application/json": {"schema": _ERROR}}, "description": description},
                )
    return result
