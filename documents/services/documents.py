"""Writes to collections and documents: create, update, delete, re-index, retry.

Every surface (web pages, the admin, the REST API, MCP, the command line) adds and changes
documents through these functions, so each rule (size limit, UTF-8, one copy of a text per
collection, ingestion queued after the commit) holds everywhere.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import SuspiciousFileOperation
from django.core.files.base import ContentFile
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.text import get_valid_filename, slugify

from documents.ingestion.extraction import Detected, ExtractionError, detect_format
from documents.models import FILE_FORMATS, Collection, Document, IngestionJob
from documents.page_views import page_images_delete
from documents.selectors import collection_get
from documents.services.collection_indexes import collection_index_drop
from documents.services.jobs import job_send
from documents.services.sharing import collection_members_set
from documents.services.trees import corpus_version_bump
from openfable.errors import ConflictError, NotFoundError, UserInputError
from openfable.tokens import count_tokens

TAG_MAX_CHARS = 100  # Document.tags holds CharField(max_length=100) items
# Tags a document carries, and their characters together: every tag reaches the corpus page's
# filter and each query's tag check (100,000 tags made the page 7 MB and 6 s).
TAGS_MAX_COUNT = 50
TAGS_MAX_TOTAL_CHARS = 2_000
TITLE_MAX_CHARS = 500
METADATA_MAX_DEPTH = 20  # levels of objects and lists; real metadata is a level or two
DEFAULT_COLLECTION_SLUG = "default"
# The slugs default collections are given; nobody may choose one for a collection of their own.
RESERVED_SLUG = re.compile(rf"{DEFAULT_COLLECTION_SLUG}(-\d+)*")


class DocumentInputError(UserInputError):
    """Document or collection input a user can fix: the message says what was wrong and what to do."""


class UnsupportedFileError(DocumentInputError):
    """A file in a format OpenFable does not read (an old .doc, a zip, an image): 415."""

    status = 415
    code = "unsupported_format"


class FileTooLargeError(DocumentInputError):
    """A file over OPENFABLE_MAX_FILE_BYTES: 413."""

    status = 413
    code = "too_large"


@dataclass(frozen=True)
class DocumentCreateResult:
    document: Document
    job: IngestionJob | None
    created: bool  # False when the same text was already in the collection


@dataclass(frozen=True)
class DocumentInput:
    """Document fields checked and normalised: what ``document_create`` stores."""

    text: str
    title: str
    tags: list[str]
    metadata: dict[str, Any]
    builder: str
    # A PDF, Word or HTML file: its bytes, kept as the original; ``text`` is "" until the worker
    # extracts it.
    file: bytes | None = None
    format: str = Document.Format.TEXT
    format_note: str = ""  # the name and the content disagree (read by content)


# -- collections ---------------------------------------------------------------------------------


def collection_create(*, name: str, slug: str = "", owner: Any = None) -> Collection:
    name = (name or "").strip()
    if not name:
        raise DocumentInputError("A collection needs a name.")
    slug = collection_slug_clean(name=name, slug=slug)
    return Collection.objects.create(name=name[:200], slug=slug, owner=owner)


def collection_slug_clean(*, name: str, slug: str = "") -> str:
    """The slug a new collection gets: the one given, refused when unusable; or one made from the
    name, always usable (the API's schema promises any name works); refused (409) when taken."""
    slug = (slug or "").strip() or _slug_from_name(name)
    slug_check(slug)
    if Collection.objects.filter(slug=slug).exists():
        raise ConflictError(f"A collection with the slug {slug!r} already exists; choose another slug.")
    return slug


def slug_check(slug: str) -> None:
    """The rules a chosen slug keeps (``DocumentInputError`` says which one it breaks)."""
    if slug != slugify(slug):
        raise DocumentInputError(
            f"The slug {slug!r} may hold only lowercase letters, digits, hyphens and underscores."
        )
    if slug.isdigit():
        # Collections are named by slug or id everywhere; an all-digit slug would read as an id.
        raise DocumentInputError(
            f"The slug {slug!r} is all digits; add a letter so it cannot pass for an id."
        )
    if slug_is_reserved(slug):
        raise DocumentInputError(f"The slug {slug!r} is kept for default collections; choose another one.")


def _slug_from_name(name: str) -> str:
    made = slugify(name or "")[:200].strip("-_")
    if not made or made.isdigit() or slug_is_reserved(made):
        # "0", "!!!" or "default" as a name: still a collection, under a slug no id can look like.
        made = f"collection-{made}".strip("-")[:200].strip("-_")
    return made


def collection_default(*, user: Any = None) -> Collection:
    """Where documents go when the caller names no collection, made on first use.

    A trusted caller (the command line: ``user=None``) and superusers share the ownerless
    default; any other user gets a default collection of their own, so their documents stay
    theirs. The default is found by its owner and ``is_default``, never by its slug: a
    collection another user made with a look-alike slug is never taken for it.
    """
    owner = None if user is None or getattr(user, "is_superuser", False) else user
    existing = Collection.objects.filter(owner=owner, is_default=True).first()
    if existing is not None:
        return existing
    if owner is None:
        name, slug = "Default", _free_default_slug(DEFAULT_COLLECTION_SLUG)
    else:
        name, slug = (
            f"{owner.get_username()}'s documents",
            _free_default_slug(f"{DEFAULT_COLLECTION_SLUG}-{owner.pk}"),
        )
    # get_or_create: two first uploads at once make one default (the unique constraint on
    # owner and is_default refuses the second insert, which then reads the first).
    collection, _ = Collection.objects.get_or_create(
        owner=owner, is_default=True, defaults={"name": name, "slug": slug}
    )
    return collection


def _free_default_slug(base: str) -> str:
    """``base``, or ``base-2``, ``base-3``… when a collection made before slugs were reserved holds it."""
    slug, suffix = base, 1
    while Collection.objects.filter(slug=slug).exists():
        suffix += 1
        slug = f"{base}-{suffix}"
    return slug


def slug_is_reserved(slug: str) -> bool:
    """Slugs of the shape default collections get ("default", "default-12", "default-12-2")."""
    return RESERVED_SLUG.fullmatch(slug) is not None


def collection_resolve(value: Collection | str | int | None, *, user: Any = None) -> Collection:
    """A collection given as itself, its slug or its id (digits in a string count as an id).

    ``None`` or "" is the default collection, made on first use. ``user`` limits the choice to
    the collections that user may see (None: a trusted caller, e.g. the command line).
    """
    if isinstance(value, Collection):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        return collection_default(user=user)
    return collection_get(user=user, collection=value)


# -- documents -----------------------------------------------------------------------------------


def decode_document_bytes(data: bytes, *, filename: str = "") -> str:
    """Uploaded files must be UTF-8 text (.txt / .md); a byte-order mark is dropped."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        where = f" in {filename}" if filename else ""
        raise DocumentInputError(
            f"The file{where} is not UTF-8 text (invalid byte at position {error.start}). "
            "Save it as UTF-8 plain text or Markdown and upload it again."
        ) from error


def document_input_clean(
    *,
    content: str | bytes | None,
    title: str = "",
    source_filename: str = "",
    tags: Iterable[str] | None = None,
    metadata: object = None,
    builder: str = "",
) -> DocumentInput:
    """Check and normalise what a user sends; raise ``DocumentInputError`` naming the problem.

    ``content`` as ``bytes`` is a file: its format is told from its content (``source_filename``
    only breaks a tie). A PDF, Word or HTML file is kept whole for the worker to extract; a
    Markdown or text file is its text. Separate from ``document_create`` so that a form can show
    the same messages beside its fields before anything is written (the admin's add form does).
    """
    # An empty file is refused as any empty document is, in the same words.
    detected = (
        _detect_file(content, filename=source_filename)
        if isinstance(content, bytes) and content.strip()
        else None
    )
    file = content if detected is not None and detected.format in FILE_FORMATS else None
    text = "" if file is not None else _clean_text(content, filename=source_filename)
    return DocumentInput(
        text=text,
        title=_clean_title(title) or _default_title(text, source_filename),
        tags=clean_tags(tags),
        metadata=clean_metadata(metadata),
        builder=_clean_builder(builder),
        file=file if isinstance(file, bytes) else None,
        format=detected.format if detected is not None else Document.Format.TEXT,
        format_note=detected.mismatch if detected is not None else "",
    )


def _detect_file(data: bytes, *, filename: str) -> Detected:
    """The file's format from its content; what ``detect_format`` can already see is refused now
    (empty, an old .doc, a damaged zip), the rest is for the worker's extraction to find."""
    name = (filename or "the file").rsplit("/", 1)[-1]
    if len(data) > settings.MAX_FILE_BYTES:
        raise FileTooLargeError(
            f"{name} is {len(data):,} bytes; files may have at most {settings.MAX_FILE_BYTES:,} "
            "(OPENFABLE_MAX_FILE_BYTES). Split it and upload the parts.",
            details={"limit_bytes": settings.MAX_FILE_BYTES},
        )
    try:
        return detect_format(data, filename=name)
    except ExtractionError as error:
        if error.code == "unsupported_format":
            raise UnsupportedFileError(f"{error.message}.") from None
        raise DocumentInputError(f"{error.message}.", code=error.code) from None


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
        source_filename=source_filename[:TITLE_MAX_CHARS],
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
        _document_save_with_original(document, data=cleaned.file, filename=source_filename)
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
        cleaned_title = _clean_title(title)
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
    _documents_lock_and_clear(Document.objects.filter(pk=document.pk))
    _originals_delete_on_commit(Document.objects.filter(pk=document.pk))
    Document.objects.filter(pk=document.pk).delete()
    corpus_version_bump()


def _originals_delete_on_commit(documents: QuerySet[Document]) -> None:
    """The stored original files of these documents, and the page images drawn from them, go
    once their rows are gone for good."""
    files = list(documents.exclude(original="").values_list("pk", "original"))
    if files:
        transaction.on_commit(partial(_files_delete, [name for _, name in files if name]))
        transaction.on_commit(partial(page_images_delete, [pk for pk, _ in files]))


def _files_delete(names: list[str]) -> None:
    storage = Document._meta.get_field("original").storage
    for name in names:
        storage.delete(name)


def _documents_lock_and_clear(documents: QuerySet[Document]) -> None:
    """Lock these documents' rows (by id, the order every writer takes them in), then delete
    their nodes in one statement; the caller deletes the documents next, in the same transaction.

    A tree being saved (``document_tree_replace``) holds its document's row until it commits.
    Waiting for it here means the nodes it wrote are seen and deleted with the rest; before, the
    delete read the old nodes, the swap committed new ones, and the commit failed on the foreign
    key (IntegrityError, a 500), or the two took the nodes and the document in opposite orders
    (a deadlock). A build that reaches its save after this finds its document gone and stops
    quietly, as does one still embedding (its job row is gone at its next heartbeat).
    """
    ids = list(documents.select_for_update().order_by("pk").values_list("pk", flat=True))
    if ids:
        with connection.cursor() as cursor:
            # One statement instead of Django's cascade collector walking the parent links.
            cursor.execute("DELETE FROM documents_node WHERE document_id = ANY(%s)", [ids])


@transaction.atomic
def document_reindex(*, document: Document, builder: str = "", queue: bool = True) -> IngestionJob:
    """Queue a new ingestion; the current tree keeps serving queries until the new one replaces it.

    One build per document at a time: a job still waiting in the queue is that ingestion (it
    runs with the builder asked for now, no second job); a build running now is refused with
    ``ConflictError`` (409) instead of a second one beside it. The database refuses a second
    unfinished job too (``job_one_unfinished_per_document``).
    """
    builder = _clean_builder(builder)
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
    """The document's queued job whose task never reached the broker, sent again now; else None.

    The same text sent again after an upload whose task was lost (the broker failed or hung
    after the commit) queues it, instead of answering with no job while it waits for the sweep.
    """
    job = IngestionJob.objects.filter(
        document=document, status=IngestionJob.Status.QUEUED, heartbeat__isnull=True
    ).first()
    if job is not None:
        transaction.on_commit(partial(job_send, job_id=job.pk, document_id=document.pk))
    return job


# -- input rules ---------------------------------------------------------------------------------


def _clean_text(content: str | bytes | None, *, filename: str) -> str:
    if content is None:
        raise DocumentInputError("The document text is missing. Paste or upload some text.")
    if isinstance(content, bytes):
        text = decode_document_bytes(content, filename=filename)
    elif isinstance(content, str):
        text = content
    else:
        raise DocumentInputError(f"The document text must be a string, not {type(content).__name__}.")
    if not text.strip():
        raise DocumentInputError("The document is empty (only whitespace). Paste or upload some text.")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise DocumentInputError(
            f"The text has an invalid character at position {error.start} (a lone surrogate, "
            "e.g. half of an emoji cut by a bad copy). Fix or remove it and send the text again."
        ) from None
    if size > settings.MAX_DOCUMENT_BYTES:
        raise DocumentInputError(
            f"The document is {size:,} bytes; the limit is {settings.MAX_DOCUMENT_BYTES:,} "
            "(OPENFABLE_MAX_DOCUMENT_BYTES). Split it into smaller documents."
        )
    if "\x00" in text:
        raise DocumentInputError("The document contains NUL characters; it does not look like text.")
    return text


def clean_tags(tags: Iterable[str] | str | None) -> list[str]:
    """Tags sorted and without repeats; an over-long or non-text tag, or too many, is refused, never cut."""
    if tags is None:
        return []
    if isinstance(tags, str):
        tags = tags.split(",")
    cleaned: set[str] = set()
    for tag in tags:
        if not isinstance(tag, str):
            raise DocumentInputError(f"Tags are text; {tag!r} is not.")
        tag = tag.strip()
        if len(tag) > TAG_MAX_CHARS:
            raise DocumentInputError(
                f"The tag {tag[:40]!r}… is {len(tag)} characters; tags hold at most {TAG_MAX_CHARS}."
            )
        if "\x00" in tag:
            raise DocumentInputError(f"The tag {tag[:40]!r} contains a NUL character; remove it.")
        if tag:
            cleaned.add(tag)
    if len(cleaned) > TAGS_MAX_COUNT:
        raise DocumentInputError(
            f"{len(cleaned):,} tags; a document carries at most {TAGS_MAX_COUNT}. Keep the ones you "
            "filter by (the rest can go in the metadata)."
        )
    if (total := sum(len(tag) for tag in cleaned)) > TAGS_MAX_TOTAL_CHARS:
        raise DocumentInputError(
            f"The tags hold {total:,} characters together; a document's tags hold at most "
            f"{TAGS_MAX_TOTAL_CHARS:,}. Use fewer or shorter tags (the rest can go in the metadata)."
        )
    return sorted(cleaned)


def clean_metadata(metadata: object) -> dict[str, Any]:
    """Metadata is a JSON object (a dict of JSON values); anything else is refused."""
    if metadata is None or metadata == "":
        return {}
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except RecursionError:
            raise DocumentInputError(_METADATA_TOO_DEEP) from None
        except ValueError as error:
            raise DocumentInputError(f"The metadata is not valid JSON: {error}.") from None
    if not isinstance(metadata, Mapping):
        raise DocumentInputError(
            f'The metadata must be a JSON object such as {{"source": "web"}}, not {type(metadata).__name__}.'
        )
    _metadata_check_shape(metadata)
    try:
        # Round-trip: refuses what JSON cannot hold (sets, dates, NaN) and lone surrogates.
        return dict(json.loads(json.dumps(metadata, allow_nan=False, ensure_ascii=False).encode("utf-8")))
    except (TypeError, ValueError, UnicodeEncodeError) as error:
        raise DocumentInputError(f"The metadata cannot be stored as JSON: {error}.") from None


_METADATA_TOO_DEEP = (
    f"The metadata is nested more than {METADATA_MAX_DEPTH} levels deep; flatten it "
    '(e.g. {"source.site": "web"}).'
)


def _metadata_check_shape(metadata: Mapping[str, Any]) -> None:
    """Refuse nesting deeper than ``METADATA_MAX_DEPTH`` and NUL characters, walking without
    recursion: 10,000 levels would overflow the JSON encoder's stack, and PostgreSQL's jsonb
    cannot hold ``\u0000``."""
    pending: list[tuple[object, int]] = [(metadata, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, Mapping | list | tuple):
            if depth > METADATA_MAX_DEPTH:
                raise DocumentInputError(_METADATA_TOO_DEEP)
            children = [*value.keys(), *value.values()] if isinstance(value, Mapping) else list(value)
            pending.extend((child, depth + 1) for child in children)
        elif isinstance(value, str) and "\x00" in value:
            raise DocumentInputError(f"The metadata holds a NUL character (in {value[:40]!r}); remove it.")


def _clean_title(title: str | None) -> str:
    if title is None:
        return ""
    if not isinstance(title, str):
        raise DocumentInputError(f"A title is text, not {type(title).__name__}.")
    title = title.strip()
    if len(title) > TITLE_MAX_CHARS:
        raise DocumentInputError(
            f"The title is {len(title)} characters; titles hold at most {TITLE_MAX_CHARS}."
        )
    if "\x00" in title:
        raise DocumentInputError("The title contains a NUL character; remove it.")
    return title


def _clean_builder(builder: str | None) -> str:
    builder = builder or ""
    if builder not in {"", *Document.Builder.values}:
        raise DocumentInputError(
            f"Unknown builder {builder!r}; use 'llm' or 'structural' (or leave it empty)."
        )
    return builder


def _default_title(text: str, filename: str) -> str:
    if filename:
        return filename.rsplit("/", 1)[-1].rsplit(".", 1)[0][:TITLE_MAX_CHARS] or filename[:TITLE_MAX_CHARS]
    first_line = next((line.strip(" #\t") for line in text.splitlines() if line.strip()), "Untitled")
    return first_line[:120]


@transaction.atomic
def collection_update(
    *,
    collection: Collection,
    name: str | None = None,
    members: Iterable[AbstractBaseUser] | None = None,
    by: Any = None,
    members_at_once: bool = False,
) -> Collection:
    """Rename a collection and/or set who besides its owner may see and change it: people not yet
    members are invited by ``by`` and become members when they accept (``documents.services.sharing``;
    ``members_at_once`` skips that, for the operator's admin)."""
    if name is not None:
        name = name.strip()
        if not name:
            raise DocumentInputError("A collection needs a name.")
        collection.name = name[:200]
        collection.save(update_fields=["name"])
    if members is not None:
        collection_members_set(collection=collection, users=members, invited_by=by, at_once=members_at_once)
    # Who may see what changed: results cached for a user must not outlive it.
    corpus_version_bump()
    return collection


@transaction.atomic
def collection_delete(*, collection: Collection) -> None:
    """Delete a collection with every document, tree and job in it, and its HNSW index.

    Safe while its documents index: see ``_documents_lock_and_clear``."""
    collection_id = collection.pk
    locked = Collection.objects.select_for_update().filter(pk=collection_id)
    if not locked.exists():
        return  # deleted meanwhile
    _documents_lock_and_clear(Document.objects.filter(collection_id=collection_id))
    _originals_delete_on_commit(Document.objects.filter(collection_id=collection_id))
    Collection.objects.filter(pk=collection_id).delete()
    corpus_version_bump()
    transaction.on_commit(lambda: collection_index_drop(collection_id))
