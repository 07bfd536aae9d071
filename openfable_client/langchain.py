"""OpenFable as a LangChain retriever (``pip install "openfable[langchain]"``).

    from openfable_client.langchain import OpenFableRetriever

    retriever = OpenFableRetriever(base_url="http://127.0.0.1:8000", token="of_...", top_k=4)
    documents = retriever.invoke("When is the deadline?")  # or: await retriever.ainvoke(...)

Each ``Document`` is one passage: ``page_content`` its exact text, ``id`` its node, ``metadata``
its document (``title``, ``source_filename``, ``tags``, ``document_metadata``, ``original``: the
URL of the file as uploaded), offsets (``start_char``, ``end_char``), ``pages`` and ``score``.
A refusal or an unreachable server raises ``OpenFableError`` with the server's code and message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from openfable_client.client import OpenFableClient, OpenFableError, Passage, QueryOptions

__all__ = ["OpenFableError", "OpenFableRetriever"]


class OpenFableRetriever(BaseRetriever):
    """The passages OpenFable finds for a query: ``top_k`` of them (default 4) or those that fit
    ``token_budget`` tokens (not both), best first unless ``order="document"``; searched in
    ``collection`` (slug or id), ``documents`` (ids) and documents carrying all ``document_tags``."""

    base_url: str
    token: str
    top_k: int | None = None
    token_budget: int | None = None
    order: Literal["score", "document"] = "score"
    mode: Literal["vector", "llm", "bipath"] | None = None
    collection: str | None = None
    documents: Sequence[int] | None = None
    # Not ``tags``: LangChain's own field of that name tags a run for its callbacks.
    document_tags: Sequence[str] | None = None
    timeout: float = 120.0

    def _client(self) -> tuple[OpenFableClient, QueryOptions]:
        options = QueryOptions(
            top_k=self.top_k,
            token_budget=self.token_budget,
            order=self.order,
            mode=self.mode,
            collection=self.collection,
            documents=self.documents,
            tags=self.document_tags,
        )
        return OpenFableClient(self.base_url, self.token, timeout=self.timeout), options

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        client, options = self._client()
        return [_document(passage) for passage in client.passages(query, options)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        client, options = self._client()
        return [_document(passage) for passage in await client.apassages(query, options)]


def _document(passage: Passage) -> Document:
    node = passage.node_id if passage.node_id is not None else f"{passage.document_id}:{passage.start_char}"
    return Document(id=f"openfable-node-{node}", page_content=passage.content, metadata=passage.metadata())
