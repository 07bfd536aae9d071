"""What the official SDK client shows for a refused token over streamable HTTP: the server's own
sentence saying what to send (``security.send_error``'s JSON-RPC error), not the SDK's stand-in
"Server returned an error response"."""

from __future__ import annotations

import pytest
from mcp import MCPError

from tests.mcp_server.conftest import Person, connect, run_async

pytestmark = pytest.mark.django_db(transaction=True)


def _sdk_error(error: BaseException) -> MCPError:
    """The SDK's ``MCPError`` inside the task groups the client raises it through."""
    if isinstance(error, MCPError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            try:
                return _sdk_error(inner)
            except LookupError:
                continue
    raise LookupError(f"no MCPError in {error!r}")


@pytest.mark.parametrize("transport", ["streamable-http", "streamable-http-legacy"])
def test_the_sdk_client_shows_why_it_was_refused(live_url: str, person: Person, transport: str) -> None:
    async def attempt(key: str | None) -> None:
        async with connect(live_url, transport, key) as client:
            await client.list_tools()

    with pytest.raises(BaseException) as missing:
        run_async(attempt, None)
    error = _sdk_error(missing.value)
    assert "Send an API token as `Authorization: Bearer <token>`" in str(error)
    assert error.error.data["code"] == "not_authenticated"

    run_async(person.revoke)
    with pytest.raises(BaseException) as revoked:
        run_async(attempt, person.key)
    error = _sdk_error(revoked.value)
    assert "unknown or was revoked" in str(error) and error.error.data["code"] == "invalid_token"
