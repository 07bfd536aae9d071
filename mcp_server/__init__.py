"""The MCP surface: OpenFable's services as MCP tools, served beside Django in the ASGI app.

``mcp_server.asgi.with_mcp`` puts the MCP endpoints in front of the Django application:
streamable HTTP at ``/v1/mcp`` and the SSE transport at ``/v1/mcp/sse`` (messages posted to
``/v1/mcp/messages/``), both behind the API tokens (``mcp_server.security``). The tools
(``mcp_server.tools``) only parse, call a service or selector as the token's user, and answer
the plain JSON every surface answers (``documents.presenters``).
"""
