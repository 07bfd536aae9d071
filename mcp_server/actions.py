"""What each MCP tool does: synchronous functions that call the services and selectors as
``user`` and answer what every surface answers (``documents.presenters``,
``RetrievalResult.to_answer``).

``mcp_server.tools`` declares the tools and runs these through ``mcp_server.sync.run_sync``, in a
thread of their own. A mistake the caller can fix is raised as a ``UserInputError`` whose message
says what to call next: the agent path's services name the step, and ``_AGENT_NEXT`` words it
as a tool call.
"""

from __future__ import annotations

import base64
import binascii
from contextlib import AbstractContextManager
from typing import Any

from django.conf import settings

from documents import selectors
from documents.agent_answers import (
    chunks_summary,
    plan_instructions,
    plan_summary,
    tree_instructions,
    tree_summary,
)
from documents.presenters import (
    collection_present,
    document_page_present,
    document_present,
    job_finished,
    job_present,
    node_present,
    tree_present,
)
from documents.services.agent import (
    AgentStep,
    agent_apply_chunks,
    agent_apply_tree,
    agent_plan,
    agent_step_worded,
)
from documents.services.documents import document_create, document_delete
from documents.services.job_queue import job_wait
from openfable.errors import UserInputError
from retrieval.services import retrieve


def wait_seconds() -> float:
    """How long ``ingest_document(wait=true)`` waits: the REST API's OPENFABLE_API_WAIT_SECONDS."""
    return float(getattr(settings, "API_WAIT_SECONDS", 120.0))


def ingest_document(
    *,
    user: Any,
    text: str,
    title: str,
    collection: str,
    tags: list[str] | None,
    builder: str,
    wait: bool,
    content_base64: str = "",
    filename: str = "",
) -> dict[str, Any]:
    content: str | bytes = _file_bytes(content_base64, filename) if content_base64 else text
    if content_base64 and text:
        raise UserInputError("Send the document as text or as content_base64, not both.")
    created = document_create(
        collection=collection or None,
        content=content,
        source_filename=filename if content_base64 else "",
        title=title,
        tags=tags,
        builder=builder,
        user=user,
    )
    job = created.job
    if job is not None and wait:
        job = job_wait(job=job, timeout=wait_seconds())
    document = selectors.document_get(user=user, pk=created.document.pk)
    answer: dict[str, Any] = {
        "document": document_present(document),
        "job": job_present(job) if job is not None else None,
        "created": created.created,
    }
    if not created.created:
        answer["note"] = "This text was already in the collection: this is that document; nothing was queued."
    elif job is not None and not job_finished(job):
        answer["note"] = (
            f"Still indexing after {wait_seconds():g} s; call job_status with job_id {job.pk} until finished."
            if wait
            else f"Indexing in the background; call job_status with job_id {job.pk} until finished."
        )
    return answer


def _file_bytes(content_base64: str, filename: str) -> bytes:
    """The file sent as base64; its size is checked before it is decoded."""
    if not filename.strip():
        raise UserInputError(
            "Give the file's name with content_base64 (filename, e.g. 'report.pdf'): it names the "
            "document and breaks a tie between formats."
        )
    if len(content_base64) > 4 * (settings.MAX_FILE_BYTES // 3 + 1) + 4:
        raise UserInputError(
            f"The file is over {settings.MAX_FILE_BYTES:,} bytes (OPENFABLE_MAX_FILE_BYTES). Split it "
            "and send the parts.",
            code="too_large",
        )
    try:
        # Whitespace is dropped first: many encoders wrap base64 at 76 characters.
        return base64.b64decode("".join(content_base64.split()), validate=True)
    except (binascii.Error, ValueError):
        raise UserInputError(
            "content_base64 is not valid base64; encode the file's bytes with standard base64 "
            "(A-Z, a-z, 0-9, +, /, = padding) and send it again."
        ) from None


def list_collections(*, user: Any) -> dict[str, Any]:
    # Collections offered to the person but not accepted are named, not searched: they are
    # accepted by a person (the web app or the REST API), not by an agent.
    offered = [
        {
            "slug": invitation.collection.slug,
            "name": invitation.collection.name,
            "invited_by": invitation.invited_by.get_username() if invitation.invited_by else None,
        }
        for invitation in selectors.invitations_for(user=user)
    ]
    return {
        "collections": [
            collection_present(found)
            for found in selectors.collection_list(user=user)
            .select_related("owner")
            .prefetch_related("members", "invitations__user")
        ],
        "invitations": offered,
    }


def list_documents(
    *, user: Any, collection: str, tag: str, status: str | None, search: str, limit: int, offset: int
) -> dict[str, Any]:
    documents = selectors.document_list(
        user=user, collection=collection or None, tag=tag or None, status=status, search=search or None
    )
    return document_page_present(documents, offset=offset, limit=limit)


def get_document(*, user: Any, document_id: int, meta_only: bool) -> dict[str, Any]:
    document = selectors.document_get(user=user, pk=document_id)
    return document_present(document, content=not meta_only, latest_job=True)


def get_tree(*, user: Any, document_id: int, flat: bool) -> dict[str, Any]:
    answer = tree_present(selectors.document_get(user=user, pk=document_id), flat=flat)
    if not answer["nodes"]:
        answer["note"] = f"The document has no tree yet (it is {answer['status']}); see job_status."
    return answer


def get_node(*, user: Any, node_id: int) -> dict[str, Any]:
    return node_present(selectors.node_get(user=user, pk=node_id))


def query(
    *,
    user: Any,
    query: str,
    token_budget: int | None,
    mode: str | None,
    collection: str,
    documents: list[int] | None,
    tags: list[str] | None,
    top_k: int | None = None,
    order: str | None = None,
) -> dict[str, Any]:
    result = retrieve(
        query=query,
        token_budget=token_budget,  # None: the default budget, unless top_k asks for passages instead
        top_k=top_k,
        order=order,
        mode=mode,
        collection=collection or None,
        documents=documents or None,
        tags=tags or None,
        user=user,
    )
    return result.to_answer()


def job_status(*, user: Any, job_id: int) -> dict[str, Any]:
    return job_present(selectors.job_get(user=user, pk=job_id))


def delete_document(*, user: Any, document_id: int) -> dict[str, Any]:
    document = selectors.document_get(user=user, pk=document_id)
    answer = {"deleted": True, "document_id": document.pk, "title": document.title}
    document_delete(document=document)
    return answer


# How each step of the agent path is called here; services.agent names the step, not the tool.
_AGENT_NEXT = {
    AgentStep.PLAN: "Call plan_document with the document's text (and its collection) to hand it to "
    "you; the same text in the same collection is this document.",
    AgentStep.APPLY_CHUNKS: "Call apply_chunks with document_id={id} and markers: the opening words of "
    "each chunk, in document order.",
    AgentStep.APPLY_TREE: "Call apply_tree with document_id={id} and tree: an object matching "
    "tree_schema over the chunk indexes apply_chunks returned.",
}


def _agent_next(step: AgentStep, document_id: int | None) -> str:
    return _AGENT_NEXT[step].format(id=document_id)


def _agent_step() -> AbstractContextManager[None]:
    """A refused step of the agent path, with its next step said as a tool call."""
    return agent_step_worded(lambda step, document_id: f"Next: {_agent_next(step, document_id)}")


def plan_document(
    *, user: Any, text: str, title: str, collection: str, tags: list[str] | None
) -> dict[str, Any]:
    created = agent_plan(collection=collection or None, content=text, title=title, tags=tags, user=user)
    document = created.document
    answer = plan_summary(document=document, created=created.created)
    answer["instructions"] = plan_instructions() | {"next": _agent_next(AgentStep.APPLY_CHUNKS, document.pk)}
    return answer


def apply_chunks(*, user: Any, document_id: int, markers: list[str]) -> dict[str, Any]:
    document = selectors.document_get(user=user, pk=document_id)
    with _agent_step():
        spans = agent_apply_chunks(document=document, markers=markers)
    return chunks_summary(document=document, markers=markers, spans=spans) | {
        "instructions": tree_instructions(len(spans))
        | {"next": _agent_next(AgentStep.APPLY_TREE, document.pk)},
    }


def apply_tree(*, user: Any, document_id: int, tree: dict[str, Any]) -> dict[str, Any]:
    document = selectors.document_get(user=user, pk=document_id)
    with _agent_step():
        job = agent_apply_tree(document=document, data=tree)
    return tree_summary(document=document, job=job)
