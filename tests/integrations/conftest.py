"""A live server (Django + MCP under uvicorn, in a thread of this process) for the clients a
program uses: a client generated from the served schema, the framework retrievers, and the
snippets of docs/integrations.md."""

from __future__ import annotations

from tests.mcp_server.conftest import Person, live_url, person

__all__ = ["Person", "live_url", "person"]
