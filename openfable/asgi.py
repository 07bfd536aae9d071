"""The ASGI application: Django, with the MCP server mounted at /v1/mcp (``mcp_server.asgi``).

Served by uvicorn (`make run`) and by gunicorn's uvicorn workers (docker-compose.yml).
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application
from django.utils.module_loading import import_string

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openfable.settings")
django_application = get_asgi_application()

# By dotted name, as urls.py includes the surfaces' URLs: the project package is the bottom
# layer (import-linter's contract in pyproject.toml) and names the surfaces without importing them.
application = import_string("mcp_server.asgi.with_mcp")(django_application)
