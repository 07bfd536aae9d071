"""Who may reach the MCP endpoints: the allowed hosts and the API tokens.

Two layers, both in front of the two transports:

* ``BearerTokenMiddleware`` (ASGI) answers 421 for a Host outside ``ALLOWED_HOSTS`` (Django's
  own matching, so ``OPENFABLE_ALLOWED_HOSTS`` means the same here as for every page) and 401
  for a missing, unknown or revoked token (``openfable.api_tokens.token_user``). It hands the
  token's user on as ``scope["user"]``, a ``TokenUser``: the SDK binds each session to it (a
  session opened with one token answers 404 to another) and the tools read the Django user
  from it.
  A request that carries an ``Origin`` (a browser's page sent it) is refused with 403 unless that
  origin is this server's own, the same scheme, host and port as the request, or one of
  ``CSRF_TRUSTED_ORIGINS`` (``origin_allowed``): a page of another local app at
  ``http://localhost:9999`` must not drive the tools of ``http://localhost:8000``.
* ``transport_security`` turns the same host list into the SDK's DNS-rebinding protection. Its
  Origin allowlist can only say "this host, any port" (it does not know the port it is served
  on), so it stays as a second net behind the exact check above.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DatabaseError
from django.http.request import split_domain_port, validate_host
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.transport_security import TransportSecuritySettings
from starlette.authentication import AuthCredentials
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_server.sync import run_sync
from openfable.api_tokens import token_user

logger = logging.getLogger(__name__)


class TokenUser(AuthenticatedUser):
    """The SDK's authenticated user, carrying the Django user the token belongs to.

    The principal is the token (``client_id``), so a session opened with one token cannot be
    driven with another, even of the same person.
    """

    def __init__(self, *, user: Any, token: Any) -> None:
        super().__init__(
            AccessToken(
                token=token.prefix, client_id=f"api-token-{token.pk}", scopes=[], subject=str(user.pk)
            )
        )
        self.user = user


def allowed_hosts() -> list[str]:
    """Django's ALLOWED_HOSTS as Django applies it: with DEBUG on and none set, the local names."""
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return list(settings.ALLOWED_HOSTS)


def transport_security(names: Sequence[str]) -> TransportSecuritySettings:
    """The SDK's Host/Origin checks for ``names`` (Django's ALLOWED_HOSTS).

    The SDK matches exact names (any port); Django also knows ``*`` and ``.example.com``
    (a domain and its subdomains). With one of those in the list the SDK's check is left off:
    ``BearerTokenMiddleware`` has already checked the Host with Django's rules, and an Origin
    allowlist cannot be written for a pattern.
    """
    hosts = [host.strip().lower() for host in names if host.strip()]
    if not hosts or any(host == "*" or host.startswith(".") for host in hosts):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[name for host in hosts for name in (host, f"{host}:*")],
        allowed_origins=[
            origin
            for host in hosts
            for scheme in ("http", "https")
            for origin in (f"{scheme}://{host}", f"{scheme}://{host}:*")
        ],
    )


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_parts(origin: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an origin or URL, the port filled in from the scheme; None
    for anything that is not an http(s) origin (``null``, a file: page)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:  # a port that is not a number, brackets that do not close
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def origin_allowed(origin: str, *, scheme: str, host: str, trusted: Sequence[str] = ()) -> bool:
    """Whether a browser page of ``origin`` may call this server, reached at ``scheme://host``:
    the same scheme, host and port (a port left out is the scheme's own), or one of ``trusted``
    (Django's CSRF_TRUSTED_ORIGINS, where ``https://*.example.com`` covers the subdomains)."""
    sent = _origin_parts(origin)
    if sent is None:
        return False
    if sent == _origin_parts(f"{scheme}://{host}"):
        return True
    for entry in trusted:
        wildcard = "://*." in entry
        allowed = _origin_parts(entry.replace("://*.", "://", 1))
        if allowed is None:
            continue
        if sent == allowed:
            return True
        if (
            wildcard
            and sent[0] == allowed[0]
            and sent[2] == allowed[2]
            and sent[1].endswith(f".{allowed[1]}")
        ):
            return True
    return False


def request_scheme(scope: Scope, headers: Headers) -> str:
    """``http`` or ``https`` as the client used it: behind a proxy that Django is told to trust
    (SECURE_PROXY_SSL_HEADER), what its header says, as ``request.is_secure()`` reads it."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, secure_value = proxy
        header = name.removeprefix("HTTP_").replace("_", "-").lower()
        if header in headers:
            return "https" if headers[header].split(",")[0].strip() == secure_value else "http"
    return str(scope.get("scheme", "http"))


def bearer_key(headers: Headers) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header; None when there is no such header."""
    scheme, _, key = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return key.strip()


class BearerTokenMiddleware:
    """Refuse requests to a host not served here (421), from a page of another origin (403) or
    without a valid API token (401)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        domain, _ = split_domain_port(headers.get("host", ""))
        if not domain or not validate_host(domain, allowed_hosts()):
            await send_error(
                send,
                421,
                "invalid_host",
                f"The host {headers.get('host', '')!r} is not served here; the server's "
                "OPENFABLE_ALLOWED_HOSTS lists the names it answers to.",
            )
            return
        origin = headers.get("origin")
        if origin is not None and not origin_allowed(
            origin,
            scheme=request_scheme(scope, headers),
            host=headers.get("host", ""),
            trusted=settings.CSRF_TRUSTED_ORIGINS,
        ):
            await send_error(
                send,
                403,
                "invalid_origin",
                f"A page at {origin!r} may not call this server: only its own pages may (same "
                "scheme, host and port), or an origin listed in OPENFABLE_CSRF_TRUSTED_ORIGINS. "
                "Programs send no Origin header and are not affected.",
            )
            return
        key = bearer_key(headers)
        if key is None:
            await send_error(
                send,
                401,
                "not_authenticated",
                "Send an API token as `Authorization: Bearer <token>`. Make one on the web app's "
                "API tokens page (/accounts/tokens/) or in the admin (API tokens).",
                challenge="Bearer",
            )
            return
        try:
            found = await run_sync(token_user, key)
        except DatabaseError:
            logger.exception("MCP: the token could not be checked")
            await send_error(send, 503, "unavailable", "The database is not reachable; try again shortly.")
            return
        if found is None:
            await send_error(
                send,
                401,
                "invalid_token",
                "This token is unknown or was revoked (changing the password revokes every token). "
                "Make a new one on the web app's API tokens page or in the admin.",
                challenge='Bearer error="invalid_token"',
            )
            return
        user, token = found
        scope = {**scope, "user": TokenUser(user=user, token=token), "auth": AuthCredentials([])}
        await self.app(scope, receive, send)


# The JSON-RPC error code of each refusal (the range -32000 to -32099 is the server's own).
_JSONRPC_CODES = {401: -32001, 403: -32003, 421: -32021, 503: -32005}


async def send_error(send: Send, status: int, code: str, message: str, *, challenge: str = "") -> None:
    """Refuse a request to an MCP endpoint, as a JSON-RPC error whose ``data`` is the project's error.

    The SDK's client reads a JSON-RPC error in the body of a refused POST and raises it with its
    message (``MCPError``); from any other body it raises only "Server returned an error
    response", and the person never learns that a token is missing. So the message is the
    JSON-RPC error's, and ``data`` is the ``{"code", "message", "details"}`` every surface
    answers. ``id`` is null: the request is refused before its id is read (the client matches
    the error to the request it sent).
    """
    error = {"code": code, "message": message, "details": {}}
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": _JSONRPC_CODES.get(status, -32000), "message": message, "data": error},
        }
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if challenge:
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
