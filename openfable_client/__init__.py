"""A small Python client of OpenFable's REST API, and retrievers for LangChain and LlamaIndex.

It depends on httpx alone (and on the framework whose retriever you import): install it with
``pip install "openfable[client]"``, ``"openfable[langchain]"`` or ``"openfable[llamaindex]"``.

- ``OpenFableClient``: ``query()`` / ``aquery()`` (the answer as the server sends it), ``passages()``
  / ``apassages()`` (each chunk as a ``Passage`` with its document's title, file name, tags,
  metadata and the link to its original).
- ``openfable_client.langchain.OpenFableRetriever``: a LangChain ``BaseRetriever``.
- ``openfable_client.llamaindex.OpenFableRetriever``: a LlamaIndex ``BaseRetriever``.

Every failure, the server's or the network's, raises ``OpenFableError`` with the server's
``code`` and ``message`` (``{"error": {"code", "message", "details"}}``).
"""

from __future__ import annotations

from openfable_client.client import OpenFableClient, OpenFableError, Passage, QueryOptions

__all__ = ["OpenFableClient", "OpenFableError", "Passage", "QueryOptions"]
