"""Writes to the corpus. Every surface (UI, API, MCP, CLI) goes through these functions."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import F
from django.utils.text import slugify

from documents.models import Collection, CorpusVersion, Document, IngestionJob


class DocumentInputError(ValueError):
    """Input a user can fix: the message says what was wrong and what to do."""


@dataclass(frozen=True)
class DocumentCreateResult:
    document: Document
    job: IngestionJob | None
    created: bool  # False when the same text was already in the collection


def corpus_version_bump() -> int:
    """Move the corpus version (call inside the transaction that changes the corpus)."""
    updated = CorpusVersion.objects.filter(pk=1).update(version=F("version") + 1)
    if not updated:
        CorpusVersion.objects.get_or_create(pk=1, defaults={"version": 1})
    return int(CorpusVersion.objects.values_list("version", flat=True).get(pk=1))


# Rebuilds the rows of documents.DocumentTerm for the documents given (parameter: id array) from
# their leaves' tsvectors (migration 0005 runs the same statement over every existing tree).
DOCUMENT_TERMS_SQL = (
    "INSERT INTO documents_documentterm (document_id, term, frequency) "
    "SELECT n.document_id, t.lexeme, sum(coalesce(array_length(t.positions, 1), 1)) "
    "FROM documents_node n CROSS JOIN LATERAL unnest(n.search) t "
    "WHERE n.kind = 'leaf' AND n.document_id = ANY(%s) "
    "GROUP BY n.document_id, t.lexeme"
)


def document_terms_refresh(document_ids: list[int]) -> None:
    """Rewrite the lexical index (``DocumentTerm``) of these documents from their current leaves.

    Call it in the transaction that writes a tree, so the index never disagrees with the nodes.
    """
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM documents_documentterm WHERE document_id = ANY(%s)", [document_ids])
        cursor.execute(DOCUMENT_TERMS_SQL, [document_ids])


def collection_create(*, name: str, slug: str = "", owner: AbstractBaseUser | None = None) -> Collection:
    name = name.strip()
    if not name:
        raise DocumentInputError("A collection needs a name.")
    slug = slug or slugify(name)[:200]
    if not slug:
        raise DocumentInputError(f"Cannot make a URL slug from the name {name!r}; give a slug.")
    if Collection.objects.filter(slug=slug).exists():
        raise DocumentInputError(f"A collection with the slug {slug!r} already exists.")
    return Collection.objects.create(name=name, slug=slug, owner=owner)  # type: ignore[misc]


def collection_get_or_create_default() -> Collection:
    collection, _ = Collection.objects.get_or_create(slug="default", defaults={"name": "Default"})
    return collection


def decode_document_bytes(data: bytes, *, filename: str = "") -> str:
    """Uploaded files must be UTF-8 text (.txt / .md)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        where = f" in {filename}" if filename else ""
        raise DocumentInputError(
            f"The file{where} is not UTF-8 text (invalid byte at position {error.start}). "
            "Save it as UTF-8 plain text or Markdown and upload it again."
        ) from error


def _resolve_collection(collection: Collection | str | int) -> Collection:
    if isinstance(collection, Collection):
        return collection
    lookup = {"pk": collection} if isinstance(collection, int) else {"slug": collection}
    found = Collection.objects.filter(**lookup).first()
    if found is None:
        raise DocumentInputError(f"There is no collection {collection!r}. Create it first or pick another.")
    return found


def _validate_content(content: str | bytes, *, filename: str) -> str:
    text = decode_document_bytes(content, filename=filename) if isinstance(content, bytes) else content
    if not text.strip():
        raise DocumentInputError("The document is empty (only whitespace). Paste or upload some text.")
    size = len(text.encode("utf-8"))
    if size > settings.MAX_DOCUMENT_BYTES:
        raise DocumentInputError(
            f"The document is {size:,} bytes; the limit is {settings.MAX_DOCUMENT_BYTES:,} "
            "(OPENFABLE_MAX_DOCUMENT_BYTES). Split it into smaller documents."
        )
    if "\x00" in text:
        raise DocumentInputError("The document contains NUL characters; it does not look like text.")
    return text


def _default_title(text: str, filename: str) -> str:
    if filename:
        return filename.rsplit("/", 1)[-1].rsplit(".", 1)[0][:500] or filename[:500]
    first_line = next((line.strip(" #\t") for line in text.splitlines() if line.strip()), "Untitled")
    return first_line[:120]


@transaction.atomic
def document_create(
    *,
    collection: Collection | str | int,
    content: str | bytes,
    title: str = "",
    source_filename: str = "",
    tags: list[str] | None = None,
    metadata: dict[str, object] | None = None,
    builder: str = "",
    reindex: bool = False,
    queue: bool = True,
) -> DocumentCreateResult:
    """Store a document (status queued) and queue its ingestion after the commit.

    The same text in the same collection returns the existing document without queueing
    anything, unless ``reindex`` is asked for. ``builder`` is "llm", "structural" or "" (the
    default: llm when an LLM is configured, else structural).
    """
    target = _resolve_collection(collection)
    text = _validate_content(content, filename=source_filename)
    if builder not in {"", Document.Builder.LLM, Document.Builder.STRUCTURAL, Document.Builder.AGENT}:
        raise DocumentInputError(f"Unknown builder {builder!r}; use 'llm' or 'structural'.")
    content_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    existing = (
        Document.objects.select_for_update().filter(collection=target, content_hash=content_hash).first()
    )
    if existing is not None:
        if not reindex:
            return DocumentCreateResult(document=existing, job=None, created=False)
        job = document_reindex(document=existing, builder=builder, queue=queue)
        return DocumentCreateResult(document=existing, job=job, created=False)

    from openfable.tokens import count_tokens

    document = Document.objects.create(
        collection=target,
        title=(title.strip() or _default_title(text, source_filename))[:500],
        source_filename=source_filename[:500],
        content=text,
        content_hash=content_hash,
        token_count=count_tokens(text),
        tags=sorted({tag.strip() for tag in tags or [] if tag.strip()}),
        metadata=metadata or {},
    )
    corpus_version_bump()
    job = _job_create(document=document, builder=builder, reindex=False, queue=queue)
    return DocumentCreateResult(document=document, job=job, created=True)


@transaction.atomic
def document_reindex(*, document: Document, builder: str = "", queue: bool = True) -> IngestionJob:
    """Queue a new ingestion; the current tree keeps serving queries until the new one replaces it."""
    Document.objects.filter(pk=document.pk).update(status=Document.Status.QUEUED)
    document.status = Document.Status.QUEUED
    return _job_create(document=document, builder=builder, reindex=True, queue=queue)


def _job_create(*, document: Document, builder: str, reindex: bool, queue: bool) -> IngestionJob:
    job = IngestionJob.objects.create(document=document, builder_requested=builder, reindex=reindex)
    if queue:
        from documents.tasks import ingest_document

        transaction.on_commit(lambda: ingest_document.delay(document.pk))
    return job
