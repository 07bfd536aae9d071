"""The MCP endpoints in front of the Django application, in one ASGI app (``openfable.asgi``).

``/v1/mcp``            streamable HTTP (POST messages; stateless, so any worker serves any request)
``/v1/mcp/sse``        the SSE transport's event stream (GET), for clients that only speak SSE
``/v1/mcp/messages/``  where SSE clients post their messages (the stream's first event says so)
everything else        Django

Both transports sit behind ``security.BearerTokenMiddleware``. The app answers the ASGI lifespan
itself: the streamable HTTP session manager must run for as long as the server does, and Django
does not speak lifespan.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from django.conf import settings
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_server.security import BearerTokenMiddleware, allowed_hosts, send_error, transport_security
from mcp_server.tools import build_server
from openfable.request_size import BodyLimit

MCP_PATH = "/v1/mcp"
SSE_PATH = "/v1/mcp/sse"
MESSAGES_PATH = "/v1/mcp/messages/"


def with_mcp(django_app: Callable[..., Awaitable[None]]) -> ASGIApp:
    """``django_app`` with the MCP endpoints in front of it. Build one per server process."""
    server = build_server()
    security = transport_security(allowed_hosts())
    # The same body limit as the REST API (a whole document travels in one message).
    body_limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0) or 10_000_000
    streamable = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        # No session to route back to: with several workers behind one port, any of them can
        # answer any request. The tools never call back into the client, which is all a
        # session would add.
        stateless_http=True,
        transport_security=security,
        max_request_body_size=body_limit,
    )
    sse = server.sse_app(
        sse_path=SSE_PATH,
        message_path=MESSAGES_PATH,
        transport_security=security,
        max_request_body_size=body_limit,
    )
    # Django behind BodyLimit: a body over the limit is refused from its Content-Length, unread.
    return _App(django=BodyLimit(django_app), streamable=streamable, sse=_CompleteSse(sse, security=security))


class _CompleteSse:
    """The SDK's SSE app, made to finish every response it starts, so that uvicorn's log stays clean.

    Two of its paths otherwise end in "Exception in ASGI application": a stream refused for its
    Origin (the SDK sends its 403, then raises to leave the handler), and a server shutting down
    with a stream open (sse-starlette stops the stream without its last body message, then the
    SDK's route starts a second, empty response on the same request). Here the refusal is answered
    before the SDK sees the request, with the project's error body; and a stream the SDK left open
    is ended with an empty last body message, whatever the SDK sends after that being dropped.
    """

    def __init__(self, app: ASGIApp, *, security: TransportSecuritySettings) -> None:
        self.app = app
        self.security = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "GET":
            refusal = await self.security.validate_request(Request(scope, receive), is_post=False)
            if refusal is not None:
                code = {403: "invalid_origin", 421: "invalid_host"}.get(refusal.status_code, "bad_request")
                reason = bytes(refusal.body).decode(errors="replace")
                await send_error(
                    send,
                    refusal.status_code,
                    code,
                    f"{reason}: this server takes MCP streams only from its own site "
                    "(the names in OPENFABLE_ALLOWED_HOSTS).",
                )
                return
        started = ended = False

        async def finishing_send(message: Message) -> None:
            nonlocal started, ended
            if ended:
                return  # the response is complete: a later one has no request to answer
            if message["type"] == "http.response.start" and started:
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            started = started or message["type"] == "http.response.start"
            ended = message["type"] == "http.response.body" and not message.get("more_body", False)
            await send(message)

        await self.app(scope, receive, finishing_send)
        if started and not ended:
            await finishing_send({"type": "http.response.body", "body": b"", "more_body": False})


class _App:
    def __init__(self, *, django: Callable[..., Awaitable[None]], streamable: ASGIApp, sse: ASGIApp) -> None:
        self.django = django
        self.streamable = streamable
        self.mcp_streamable = BearerTokenMiddleware(streamable)
        self.mcp_sse = BearerTokenMiddleware(sse)
        self.running = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        path = scope.get("path", "")
        if path == SSE_PATH or path.startswith(MESSAGES_PATH):
            await self._mcp(self.mcp_sse, scope, receive, send)
        elif path == MCP_PATH or path.startswith(MCP_PATH + "/"):
            await self._mcp(self.mcp_streamable, scope, receive, send)
        else:
            await self.django(scope, receive, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The streamable HTTP app's own lifespan starts its session manager; note when it runs.
        async def observed_send(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                self.running = True
            elif message["type"].startswith("lifespan.shutdown"):
                self.running = False
            await send(message)

        await self.streamable(scope, receive, observed_send)

    async def _mcp(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.running and scope["type"] == "http":
            # Served without the ASGI lifespan (e.g. uvicorn --lifespan off): say so, rather
            # than fail each request with the SDK's "task group is not initialized".
            await send_error(
                send,
                503,
                "unavailable",
                "The MCP endpoints need the ASGI lifespan; serve the app with uvicorn or gunicorn's "
                "uvicorn worker, lifespan on.",
            )
            return
        await app(scope, receive, send)
