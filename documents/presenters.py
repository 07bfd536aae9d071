"""One plain-JSON shape per entity (a collection, a document, a node, an ingestion job) that every
surface returns: the REST API, the MCP tools and the command line. A surface adds only what is its
own (the REST API's download link, a command's file path); it never reshapes these, so the three
cannot drift apart. The REST schema declares the same fields (``api.serializers``);
``tests/documents/test_presenters.py`` checks that every surface answers them for the same object.

A query's result has its own in ``retrieval.result`` (``RetrievalResult.to_answer``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from documents import selectors
from documents.models import Collection, Document, IngestionJob, Node
from documents.progress_words import progress_words

_FINISHED = (IngestionJob.Status.SUCCEEDED, IngestionJob.Status.FAILED)


def _when(moment: datetime | None) -> str | None:
    # ISO 8601 with the offset, as DRF writes a DateTimeField ("Z" for UTC).
    if moment is None:
        return None
    text = moment.isoformat()
    return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text


def collection_present(collection: Collection) -> dict[str, Any]:
    """A collection, with who shares it. ``members`` and ``invited`` read what a list prefetched
    (``members``, ``invitations__user``), else one query each."""
    count = getattr(collection, "document_count", None)
    return {
        "id": collection.pk,
        "name": collection.name,
        "slug": collection.slug,
        "owner": collection.owner.get_username() if collection.owner is not None else None,
        "members": sorted(member.get_username() for member in collection.members.all()),
        "invited": sorted(selectors.collection_invited(collection=collection)),
        "document_count": count if count is not None else collection.documents.count(),
        "created": _when(collection.created),
    }


def ocr_note(document: Document) -> str:
    """The sentence every surface shows when some of the text was read by OCR; "" when none was."""
    pages = sorted(document.recognised_pages or [])
    if not pages:
        return ""
    total = len(document.page_spans or [])
    where = f"all {total} pages" if len(pages) == total and total > 1 else _page_ranges(pages)
    return (
        f"The text of {where} was recognised from the page images (OCR): it may hold misread "
        "words, and only the page images show the original"
    )


def _page_ranges(pages: list[int]) -> str:
    """[1, 2, 3, 7] as "pages 1-3 and 7" (an en dash), [4] as "page 4"."""
    runs: list[list[int]] = []
    for page in pages:
        if runs and page == runs[-1][-1] + 1:
            runs[-1].append(page)
        else:
            runs.append([page])
    parts = [f"{run[0]}–{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs]
    label = "page" if len(pages) == 1 else "pages"
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{label} {listed}"


def document_present(
    document: Document, *, content: bool = False, latest_job: bool = False, now: datetime | None = None
) -> dict[str, Any]:
    """A document: its text only with ``content``, its newest ingestion job with ``latest_job``
    (a single document's answer; a list leaves both out). ``metadata`` is the document's own."""
    count = getattr(document, "node_count", None)
    answer: dict[str, Any] = {
        "id": document.pk,
        "document_id": document.pk,  # the original OpenFable API's name for it
        "title": document.title,
        "collection": document.collection.slug,
        "status": document.status,
        "builder": document.builder,
        "token_count": document.token_count,
        "node_count": count if count is not None else Node.objects.filter(document=document).count(),
        "tags": list(document.tags or []),
        "metadata": dict(document.metadata or {}),
        "source_filename": document.source_filename,
        "format": document.format,
        "format_note": document.format_note,
        "page_count": len(document.page_spans or []),
        "recognised_pages": list(document.recognised_pages or []),
        "ocr_note": ocr_note(document),
        "content_hash": document.content_hash,
        "embedding_model": document.embedding_model,
        "tree_version": document.tree_version,
        "created": _when(document.created),
        "updated": _when(document.updated),
    }
    if latest_job:
        job = selectors.document_latest_job(document=document)
        answer["latest_job"] = job_present(job, now=now) if job is not None else None
    if content:
        answer["content"] = document.content
    return answer


def document_page_present(documents: QuerySet[Document], *, offset: int, limit: int) -> dict[str, Any]:
    """A page of a document list (``selectors.document_list``), newest first and then by id, so
    pages never shift: ``count`` matching in all, the page's ``offset`` and ``limit``,
    ``next_offset`` (null on the last page) and the ``documents``, each as a list entry.

    The MCP tool and the command line answer this; the REST API answers the same ``count`` and
    entries in DRF's page, ``{count, next, previous, results}``, its /v1 contract."""
    ordered = documents.order_by("-created", "-id")
    total = ordered.count()
    # Past the end the page is empty without asking: PostgreSQL refuses an OFFSET beyond 2**63.
    page = (
        [document_present(document) for document in ordered[offset : offset + limit]]
        if offset < total
        else []
    )
    return {
        "count": total,
        "offset": offset,
        "limit": limit,
        "next_offset": offset + limit if offset + limit < total else None,
        "documents": page,
    }


def tree_present(document: Document, *, flat: bool = False) -> dict[str, Any]:
    """A document's tree: which document, and its ``nodes`` in document order, the root with
    nested ``children`` or, with ``flat``, a list with parent ids (``selectors.document_tree``).

    The MCP tool and the command line answer this; the REST API's ``GET /documents/{id}/tree``
    answers its ``nodes`` alone, its /v1 contract."""
    return {
        "document_id": document.pk,
        "title": document.title,
        "status": document.status,
        "flat": flat,
        "nodes": selectors.document_tree(document=document, flat=flat),
    }


def node_present(node: Node) -> dict[str, Any]:
    """A node with its exact text: the document's ``[start_char, end_char)`` slice."""
    document = node.document
    return {
        "id": node.pk,
        "document": node.document_id,
        "document_title": document.title,
        "parent": node.parent_id,
        "kind": node.kind,
        "depth": node.depth,
        "ordinal": node.ordinal,
        "order": node.order,
        "title": node.title,
        "summary": node.summary,
        "toc_path": node.toc_path,
        "start_char": node.start_char,
        "end_char": node.end_char,
        "token_count": node.token_count,
        "edited": node.edited,
        "embedding_stale": node.embedding_stale,
        "excluded": node.excluded,
        "pages": document.pages_of(node.start_char, node.end_char),
        "content": document.content[node.start_char : node.end_char],
    }


def job_present(job: IngestionJob, *, now: datetime | None = None) -> dict[str, Any]:
    """An ingestion job. ``finished`` is when it succeeded or failed (null until then);
    ``progress`` the percent of the whole build; ``step`` the current stage as the corpus page
    says it (``documents.progress_words``), with the numbers behind the words."""
    ahead = selectors.job_queue_ahead(job=job) if job.status == IngestionJob.Status.QUEUED else None
    words = progress_words(
        status=job.status,
        stage=job.stage,
        percent=job.progress,
        done=job.stage_done,
        total=job.stage_total,
        stage_started=job.stage_started,
        ahead=ahead,
        now=now or timezone.now(),
    )
    return {
        "id": job.pk,
        "document": job.document_id,
        "status": job.status,
        "stage": job.stage,
        "progress": job.progress,
        "step": {
            "words": words.stage,
            "done": words.done,
            "total": words.total,
            "queue_ahead": words.ahead,
            "queue": words.queue,
            "seconds_left": round(words.seconds_left) if words.seconds_left is not None else None,
            "time_left": words.time_left,
        },
        "builder_requested": job.builder_requested,
        "reindex": job.reindex,
        "chunk_count": job.chunk_count,
        "node_count": job.node_count,
        "llm_calls": job.llm_calls,
        "llm_cached_calls": job.llm_cached_calls,
        "llm_prompt_tokens": job.llm_prompt_tokens,
        "llm_completion_tokens": job.llm_completion_tokens,
        "llm_cost_usd": float(job.llm_cost_usd),
        "fallback_reason": job.fallback_reason,
        "error": job.error,
        "timings": dict(job.timings or {}),
        "document_tokens": job.document_tokens,
        "embedded_tokens": job.embedded_tokens,
        "created": _when(job.created),
        "started": _when(job.started),
        "finished": _when(job.finished),
    }


def job_finished(job: IngestionJob) -> bool:
    return job.status in _FINISHED
