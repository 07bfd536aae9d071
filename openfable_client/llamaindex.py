"""OpenFable as a LlamaIndex retriever (``pip install "openfable[llamaindex]"``).

    from openfable_client.llamaindex import OpenFableRetriever

    retriever = OpenFableRetriever(base_url="http://127.0.0.1:8000", token="of_...", top_k=4)
    for hit in retriever.retrieve("When is the deadline?"):  # or: await retriever.aretrieve(...)
        print(hit.score, hit.node.start_char_idx, hit.node.metadata["pages"], hit.node.text[:80])

Each ``NodeWithScore`` holds a ``TextNode``: its exact text, ``start_char_idx`` / ``end_char_idx``
(offsets into the document's text), ``metadata`` (title, pages, section path, file name, tags, the
document's own metadata, ``original``: the URL of the file as uploaded) and a SOURCE relationship
to its document. A refusal or an unreachable server raises ``OpenFableError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode

from openfable_client.client import OpenFableClient, OpenFableError, Passage, QueryOptions

__all__ = ["OpenFableError", "OpenFableRetriever"]

# Shown to an LLM with the text (LlamaIndex's ``get_content(MetadataMode.LLM)``); the rest is for programs.
_FOR_THE_LLM = ("title", "toc_path", "pages")


class OpenFableRetriever(BaseRetriever):
    """The passages OpenFable finds for a query: ``top_k`` of them (default 4) or those that fit
    ``token_budget`` tokens (not both), best first unless ``order="document"``; searched in
    ``collection`` (slug or id), ``documents`` (ids) and documents carrying all ``document_tags``
    (the name the LangChain retriever must use)."""

    def __init__(
        self,
        *,
        base_url: str,
        token: str,
        top_k: int | None = None,
        token_budget: int | None = None,
        order: Literal["score", "document"] = "score",
        mode: Literal["vector", "llm", "bipath"] | None = None,
        collection: str | None = None,
        documents: Sequence[int] | None = None,
        document_tags: Sequence[str] | None = None,
        timeout: float = 120.0,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        self._openfable = OpenFableClient(base_url, token, timeout=timeout)
        self._options = QueryOptions(
            top_k=top_k,
            token_budget=token_budget,
            order=order,
            mode=mode,
            collection=collection,
            documents=documents,
            tags=document_tags,
        )
        super().__init__(callback_manager=callback_manager, **kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [_hit(passage) for passage in self._openfable.passages(query_bundle.query_str, self._options)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        passages = await self._openfable.apassages(query_bundle.query_str, self._options)
        return [_hit(passage) for passage in passages]


def _hit(passage: Passage) -> NodeWithScore:
    metadata = passage.metadata()
    node_id = (
        passage.node_id if passage.node_id is not None else f"{passage.document_id}:{passage.start_char}"
    )
    node = TextNode(
        id_=f"openfable-node-{node_id}",
        text=passage.content,
        start_char_idx=passage.start_char,
        end_char_idx=passage.end_char,
        metadata=metadata,
        excluded_llm_metadata_keys=[key for key in metadata if key not in _FOR_THE_LLM],
        excluded_embed_metadata_keys=list(metadata),
        relationships={
            NodeRelationship.SOURCE: RelatedNodeInfo(
                node_id=f"openfable-document-{passage.document_id}",
                metadata={
                    "document_id": passage.document_id,
                    "title": passage.title,
                    "source_filename": passage.source_filename,
                    "original": passage.original,
                },
            )
        },
    )
    return NodeWithScore(node=node, score=passage.score)
