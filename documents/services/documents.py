"""Writes to documents: create, update, delete, re-index, retry.

Every surface (web pages, the admin, the REST API, MCP, the command line) adds and changes
documents through these functions, so each rule (size limit, UTF-8, one copy of a text per
collection, ingestion queued after the commit) holds everywhere. The input rules themselves are
``documents.services.document_input``; collections are ``documents.services.collections``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.core.exceptions import SuspiciousFileOperation
from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone
from django.utils.text import get_valid_filename

from documents.models import Collection, Document, IngestionJob
from documents.services.collections import collection_resolve
from documents.services.deletion import documents_clear
from documents.services.document_input import (
    DocumentInputError,
    clean_builder,
    clean_metadata,
    clean_tags,
    clean_title,
    document_input_clean,
)
from documents.services.job_queue import job_resend_stuck, job_send
from documents.services.trees import corpus_version_bump
from openfable.errors import ConflictError, NotFoundError
from openfable.tokens import count_tokens


@dataclass(frozen=True)
class DocumentCreateResult:
    document: Document
    job: IngestionJob | None
    created: bool  # False when the same text was already in the collection


@transaction.atomic
def document_create(
    *,
    collection: Collection | str | int | None,
    content: str | bytes | None,
    title: str = "",
    source_filename: str = "",
    tags: Iterable[str] | None = None,
    metadata: object = None,
    builder: str = "",
    reindex: bool = False,
    queue: bool = True,
    user: Any = None,
) -> DocumentCreateResult:
    """Store a document (status queued) and queue its ingestion after the commit.

    ``collection`` is a collection, its slug or id, or None for the default one. The same text
    in the same collection returns the existing document without queueing anything, unless
    ``reindex`` is asked for. ``builder`` is "llm", "structural", "agent" or "" (the default:
    llm when an LLM is configured, else structural). ``queue=False`` leaves the job for the
    caller to run (``documents.services.jobs.job_run_now``). ``user``: the person adding it,
    who must be able to see the collection (None: a trusted caller).
    """
    cleaned = document_input_clean(
        content=content,
        title=title,
        source_filename=source_filename,
        tags=tags,
        metadata=metadata,
        builder=builder,
    )
    # Resolved after the input is checked and inside the transaction: a refused document
    # leaves no default collection behind.
    target = collection_resolve(collection, user=user)
    # A file is the same document when its bytes are the same (its text is not known yet).
    content_hash = hashlib.sha256(
        cleaned.file if cleaned.file is not None else cleaned.text.encode("utf-8")
    ).hexdigest()
    existing = (
        Document.objects.select_for_update().filter(collection=target, content_hash=content_hash).first()
    )
    if existing is not None:
        if not reindex:
            job = _job_resend_unsent(existing) if queue else None
            return DocumentCreateResult(document=existing, job=job, created=False)
        job = document_reindex(document=existing, builder=cleaned.builder, queue=queue)
        return DocumentCreateResult(document=existing, job=job, created=False)

    document = Document(
        collection=target,
        title=cleaned.title,
        source_filename=cleaned.source_filename,
        content=cleaned.text,
        content_hash=content_hash,
        token_count=count_tokens(cleaned.text),
        tags=cleaned.tags,
        metadata=cleaned.metadata,
        format=cleaned.format,
        format_note=cleaned.format_note,
    )
    if cleaned.file is None:
        document.save()
    else:
        _document_save_with_original(document, data=cleaned.file, filename=cleaned.source_filename)
    corpus_version_bump()
    job = _job_create(document=document, builder=cleaned.builder, reindex=False, queue=queue)
    return DocumentCreateResult(document=document, job=job, created=True)


def _document_save_with_original(document: Document, *, data: bytes, filename: str) -> None:
    """Write the original file to storage, then the row; a row that fails takes its file with it.

    (A caller's outer transaction rolled back later leaves the file behind, unreferenced: storage
    has no transactions. Its name is the content's hash, so nothing of it is ever served.)"""
    document.original.save(_storage_name(filename, document.format), ContentFile(data), save=False)
    stored = document.original.name or ""
    try:
        document.save()
    except BaseException:
        document.original.storage.delete(stored)
        raise


def document_original_restore(*, document: Document, data: bytes, filename: str) -> None:
    """Give a document restored from an export (``documents.services.backup``) its original file
    back: stored as an upload stores it, and the document known by the file's hash again, so
    that uploading the same file later finds it."""
    document.original.save(_storage_name(filename, document.format), ContentFile(data), save=False)
    document.content_hash = hashlib.sha256(data).hexdigest()
    Document.objects.filter(pk=document.pk).update(
        original=document.original.name, content_hash=document.content_hash
    )


def document_text_layer_restore(*, document: Document, pages: list[int], data: bytes) -> None:
    """Give a document restored from an export its pages read by OCR and their text layer back
    (``Document.text_layer``), as the job that read them stored them."""
    document.text_layer.save("recognised.pdf", ContentFile(data), save=False)
    document.recognised_pages = list(pages)
    Document.objects.filter(pk=document.pk).update(
        text_layer=document.text_layer.name, recognised_pages=pages
    )


def _storage_name(filename: str, format: str) -> str:
    """A safe file name for storage: the upload's own, else one with the format's extension."""
    try:
        name = get_valid_filename(filename.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]) if filename else ""
    except SuspiciousFileOperation:  # "..", or nothing left once cleaned
        name = ""
    return name or f"original.{_EXTENSIONS[format]}"


_EXTENSIONS: dict[str, str] = {
    Document.Format.PDF: "pdf",
    Document.Format.DOCX: "docx",
    Document.Format.HTML: "html",
}


_UNSET: Any = object()


@transaction.atomic
def document_update(
    *,
    document: Document,
    title: str = _UNSET,
    tags: Iterable[str] = _UNSET,
    metadata: object = _UNSET,
) -> Document:
    """Change what describes a document (title, tags, metadata); never its text or its tree.

    The text is what every node's offsets point into: changing it is a new document (or a
    re-index of one), never an edit. Only the fields given are written.
    """
    changes: dict[str, Any] = {}
    if title is not _UNSET:
        cleaned_title = clean_title(title)
        if not cleaned_title:
            raise DocumentInputError("A document needs a title.")
        changes["title"] = cleaned_title
    if tags is not _UNSET:
        changes["tags"] = clean_tags(tags)
    if metadata is not _UNSET:
        changes["metadata"] = clean_metadata(metadata)
    if not changes:
        return document
    for field, value in changes.items():
        setattr(document, field, value)
    document.save(update_fields=[*changes, "updated"])
    # Titles and tags reach query results and filters: cached results must not outlive them.
    corpus_version_bump()
    return document


@transaction.atomic
def document_delete(*, document: Document) -> None:
    """Delete a document with its tree and jobs; a worker indexing it finds it gone and stops quietly."""
    documents_clear(Document.objects.filter(pk=document.pk))
    Document.objects.filter(pk=document.pk).delete()
    corpus_version_bump()


@transaction.atomic
def document_reindex(*, document: Document, builder: str = "", queue: bool = True) -> IngestionJob:
    """Queue a new ingestion; the current tree keeps serving queries until the new one replaces it.

    One build per document at a time: a job still waiting in the queue is that ingestion (it
    runs with the builder asked for now, no second job); a build running now is refused with
    ``ConflictError`` (409) instead of a second one beside it. The database refuses a second
    unfinished job too (``job_one_unfinished_per_document``).
    """
    builder = clean_builder(builder)
    # Locked first: two re-indexes of one document at once take turns here.
    if not Document.objects.select_for_update().filter(pk=document.pk).exists():
        raise NotFoundError(f"There is no document {document.pk}; it was deleted.")
    unfinished = (
        IngestionJob.objects.select_for_update()
        .filter(document=document, status__in=[IngestionJob.Status.QUEUED, IngestionJob.Status.RUNNING])
        .first()
    )
    if unfinished is not None and unfinished.status == IngestionJob.Status.RUNNING:
        raise ConflictError(
            f"Document {document.pk} is being indexed now (job {unfinished.pk}: "
            f"{unfinished.get_stage_display()}, {unfinished.progress} %). Wait until that job "
            "finishes, then re-index it (a job whose worker died is marked failed after "
            "OPENFABLE_JOB_STALL_SECONDS without a sign of life)."
        )
    Document.objects.filter(pk=document.pk).update(status=Document.Status.QUEUED)
    document.status = Document.Status.QUEUED
    if unfinished is not None:  # waiting in the queue: it is the re-index, with this builder
        unfinished.builder_requested = builder
        unfinished.reindex = True
        unfinished.save(update_fields=["builder_requested", "reindex"])
        if queue:  # its message may be lost: asking again sends it again
            job_resend_stuck(job=unfinished)
        return unfinished
    return _job_create(document=document, builder=builder, reindex=True, queue=queue)


@transaction.atomic
def job_retry(*, job: IngestionJob, queue: bool = True) -> IngestionJob:
    """Run a failed ingestion again with the builder it asked for (a new job; the old one stays as a record)."""
    if job.status != IngestionJob.Status.FAILED:
        raise ConflictError(
            f"Job {job.pk} has not failed (it is {job.status}); only a failed job can be retried."
        )
    return document_reindex(document=job.document, builder=job.builder_requested, queue=queue)


def _job_create(*, document: Document, builder: str, reindex: bool, queue: bool) -> IngestionJob:
    # A job the caller runs in-process (queue=False) is handed over now; a queued one once its
    # message is sent (job_send), so that the worker's sweep can tell one that never was.
    job = IngestionJob.objects.create(
        document=document,
        builder_requested=builder,
        reindex=reindex,
        heartbeat=None if queue else timezone.now(),
    )
    if queue:
        transaction.on_commit(partial(job_send, job_id=job.pk, document_id=document.pk))
    return job


def _job_resend_unsent(document: Document) -> IngestionJob | None:
    """The document's queued job, its message sent again when it may be lost; else None.

    The same text sent again after an upload whose task was lost (the broker failed or hung
    after the commit, or the message went missing in the broker) queues it again
    (``job_resend_stuck``), instead of answering with a job that waits for the sweep.
    """
    job = IngestionJob.objects.filter(document=document, status=IngestionJob.Status.QUEUED).first()
    if job is None:
        return None
    return job if job_resend_stuck(job=job) else None
