"""The live ASGI server (Django + MCP under uvicorn) and MCP clients of tests/mcp_server, for the
original project's end-to-end MCP flow."""

from __future__ import annotations

from tests.mcp_server.conftest import Person, connect, live_url, person, run_async

__all__ = ["Person", "connect", "live_url", "person", "run_async"]
