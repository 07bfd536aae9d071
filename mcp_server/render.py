"""What the MCP tools answer: plain JSON objects built from models and retrieval results.

The fields follow the REST API's where both have them, so one client can read either, but this
module imports nothing from it: each surface renders for itself. Every text is sent once (a
model pays for each token it reads): a query's passages are in ``chunks``, not repeated in
``documents`` or ``result``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from documents.models import Collection, Document, IngestionJob, Node
from retrieval.result import RetrievalResult

_ROUTING = {"documents": "document_level", "nodes": "node_level"}
_FINISHED = (IngestionJob.Status.SUCCEEDED, IngestionJob.Status.FAILED)


def _when(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def collection_entry(collection: Collection) -> dict[str, Any]:
    return {
        "collection_id": collection.pk,
        "slug": collection.slug,
        "name": collection.name,
        "documents": getattr(collection, "document_count", None),
        "created": _when(collection.created),
    }


def document_meta(document: Document) -> dict[str, Any]:
    """A document without its text."""
    return {
        "document_id": document.pk,
        "title": document.title,
        "collection": document.collection.slug,
        "status": document.status,
        "builder": document.builder,
        "token_count": document.token_count,
        "node_count": getattr(document, "node_count", None),
        "tags": list(document.tags or []),
        "metadata": dict(document.metadata or {}),
        "source_filename": document.source_filename,
        "format": document.format,
        "format_note": document.format_note,
        "page_count": len(document.page_spans or []),
        "embedding_model": document.embedding_model,
        "created": _when(document.created),
        "updated": _when(document.updated),
    }


def job_entry(job: IngestionJob) -> dict[str, Any]:
    return {
        "job_id": job.pk,
        "document_id": job.document_id,
        "status": job.status,
        "finished": job.status in _FINISHED,
        "stage": job.stage,
        "progress": job.progress,
        "builder_requested": job.builder_requested,
        "reindex": job.reindex,
        "chunk_count": job.chunk_count,
        "node_count": job.node_count,
        "llm_calls": job.llm_calls,
        "llm_cost_usd": float(job.llm_cost_usd),
        "fallback_reason": job.fallback_reason,
        "error": job.error,
        "created": _when(job.created),
        "started": _when(job.started),
        "finished_at": _when(job.finished),
    }


def node_entry(node: Node) -> dict[str, Any]:
    """A node with its exact text: the document's ``[start_char, end_char)`` slice."""
    return {
        "node_id": node.pk,
        "document_id": node.document_id,
        "document_title": node.document.title,
        "parent_id": node.parent_id,
        "kind": node.kind,
        "depth": node.depth,
        "order": node.order,
        "title": node.title,
        "summary": node.summary,
        "toc_path": node.toc_path,
        "start_char": node.start_char,
        "end_char": node.end_char,
        "token_count": node.token_count,
        "edited": node.edited,
        "pages": node.document.pages_of(node.start_char, node.end_char),
        "content": node.document.content[node.start_char : node.end_char],
    }


def query_answer(result: RetrievalResult) -> dict[str, Any]:
    """The REST API's query shape (routing, documents, chunks, result), each passage once.

    ``chunks`` are the evidence in document order, with the path and offsets a citation needs;
    ``documents`` are the ones the budget was routed on; ``result`` is the engine's whole report
    (every path, score and timing) with the chunk texts left out, as they are in ``chunks``.
    """
    report = result.to_dict()
    report["chunks"] = [
        {key: value for key, value in chunk.items() if key != "text"} for chunk in report["chunks"]
    ]
    return {
        "query": result.query,
        "routing": _ROUTING[result.routing],
        "total_tokens": result.total_tokens,
        "token_budget": result.token_budget,
        "documents": [
            {
                "document_id": hit.document_id,
                "title": hit.title,
                "score": hit.score,
                "token_count": hit.token_count,
            }
            for hit in result.documents
            if hit.selected
        ],
        "chunks": [
            {
                "node_id": chunk.node_id,
                "document_id": chunk.document_id,
                "document_title": chunk.document_title,
                "toc_path": chunk.toc_path,
                "kind": chunk.kind,
                "start_char": chunk.start_char,
                "end_char": chunk.end_char,
                "content": chunk.text,
                "token_count": chunk.token_count,
                "score": chunk.scores.fused,
                "position": position,
                "source": chunk.found_by[0] if chunk.found_by else "",
                "truncated": chunk.truncated,
                "pages": list(chunk.pages),
            }
            for position, chunk in enumerate(result.chunks)
        ],
        "notes": list(result.notes),
        "result": report,
    }
