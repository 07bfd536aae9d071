"""``Authorization: Bearer <key>`` with the API tokens of ``openfable.api_tokens``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from openfable.api_tokens import token_user


class BearerTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0].lower() != self.keyword.lower():
            return None  # not ours: session authentication may still apply
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Send the header as `Authorization: Bearer <token>`.")
        found = token_user(header[1])
        if found is None:
            raise exceptions.AuthenticationFailed(
                "This token is unknown or was revoked (changing the password revokes every token). "
                "Make a new one in the web app or the admin."
            )
        return found

    def authenticate_header(self, request: Request) -> str:
        return self.keyword  # a 401 (not 403) with WWW-Authenticate: Bearer


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An OpenFable API token (of_…)."}
