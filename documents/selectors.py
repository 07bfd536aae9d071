"""Reads of the corpus, including who may see what. Every surface and retrieval's scope call these.

Visibility: a user sees the collections they own or are a member of, and what is in them;
a superuser sees everything. ``user=None`` is a trusted caller inside the machine (the command
line, the benchmarks, Celery tasks) and sees everything too. Anything a user may not see reads
as absent (``NotFoundError``, a 404), never as forbidden, so ids do not leak what exists.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Count, F, Func, IntegerField, JSONField, OuterRef, Q, QuerySet, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Left

from documents.models import (
    Collection,
    CollectionInvitation,
    CollectionSearchStats,
    CorpusVersion,
    Document,
    IngestionJob,
    Node,
    TreeEdit,
    collection_index_name,
    page_finder,
)
from documents.review import ReviewItem, review_nodes, score_review
from documents.tree_edits import STATE_FIELDS, EditTree, MovePlace, NodeState
from openfable.errors import NotFoundError, UserInputError
from openfable.tokens import count_tokens


def _sees_everything(user: Any) -> bool:
    return user is None or bool(getattr(user, "is_superuser", False) and getattr(user, "is_active", False))


def collections_visible(*, user: Any) -> QuerySet[Collection]:
    """The collections ``user`` may read (all of them for a superuser or a trusted caller)."""
    if _sees_everything(user):
        return Collection.objects.all()
    if not getattr(user, "is_authenticated", False):
        return Collection.objects.none()
    # A subquery rather than a join: no duplicate rows for an owner who is also a member.
    member_of = Collection.members.through.objects.filter(user_id=user.pk).values("collection_id")
    return Collection.objects.filter(Q(owner_id=user.pk) | Q(pk__in=member_of))


def collection_list(*, user: Any) -> QuerySet[Collection]:
    return collections_visible(user=user).annotate(document_count=Count("documents")).order_by("name")


def collection_get(*, user: Any, collection: Collection | str | int) -> Collection:
    """A visible collection by slug or id (digits in a string count as an id); ``NotFoundError`` otherwise."""
    visible = collections_visible(user=user)
    if isinstance(collection, Collection):
        collection = collection.pk
    found: Collection | None = None
    if isinstance(collection, str) and "\x00" not in collection:  # PostgreSQL text cannot hold NUL
        found = visible.filter(slug=collection.strip()).first()
    if found is None and (pk := as_id(collection)) is not None:
        found = visible.filter(pk=pk).first()
    if found is None:
        raise NotFoundError(
            f"There is no collection {collection!r}. Use the slug or id of a collection you can see "
            "(see the collection list)."
        )
    return found


def collections_contents(collection_ids: Sequence[int]) -> tuple[bool, int]:
    """Whether these collections hold any document, and how many of their documents a query can
    search (``CollectionSearchStats``), in one read whatever their size: a query over whole
    collections keeps to them in its own statements instead of listing their documents. Plain SQL
    on the query's hot path (docs/benchmarks.md, "Latency on real corpora")."""
    ids = list(collection_ids)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT EXISTS (SELECT 1 FROM {connection.ops.quote_name(Document._meta.db_table)} "
            "                WHERE collection_id = ANY(%s)), "
            "       (SELECT coalesce(sum(documents), 0) "
            f"        FROM {connection.ops.quote_name(CollectionSearchStats._meta.db_table)} "
            "        WHERE collection_id = ANY(%s))",
            [ids, ids],
        )
        row = cursor.fetchone()
    return (bool(row[0]), int(row[1])) if row else (False, 0)


def document_texts(document_ids: Sequence[int]) -> dict[int, tuple[str, list[list[int]]]]:
    """Each document's text and page map (``Document.page_spans``), by id: what a query slices
    its chunks from. Plain SQL on the query's hot path (docs/benchmarks.md, "Latency on real corpora")."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, content, page_spans::text FROM {connection.ops.quote_name(Document._meta.db_table)} "
            "WHERE id = ANY(%s)",
            [list(document_ids)],
        )
        return {pk: (content, json.loads(page_spans)) for pk, content, page_spans in cursor.fetchall()}


def document_sources(document_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """What a query's answer says once per document its chunks come from: title, file name,
    format, tags and metadata, by id (one read, whatever the number of documents)."""
    fields = ("title", "source_filename", "format", "tags", "metadata")
    rows = Document.objects.filter(pk__in=list(document_ids)).values("id", *fields)
    return {row["id"]: {"document_id": row["id"], **{name: row[name] for name in fields}} for row in rows}


def collection_may_manage(*, user: Any, collection: Collection) -> bool:
    """Whether ``user`` may rename, share or delete ``collection``: its owner (or a superuser)."""
    return _sees_everything(user) or (
        collection.owner_id is not None and collection.owner_id == getattr(user, "pk", None)
    )


def documents_visible(*, user: Any) -> QuerySet[Document]:
    if _sees_everything(user):
        return Document.objects.all()
    return Document.objects.filter(collection__in=collections_visible(user=user))


def document_list(
    *,
    user: Any,
    collection: Collection | str | int | None = None,
    status: str | None = None,
    tag: str | None = None,
    search: str | None = None,
    created_after: Any = None,
    created_before: Any = None,
) -> QuerySet[Document]:
    """Visible documents, newest first, without their text; filters are optional."""
    for name, value in (("tag", tag), ("search", search)):
        if isinstance(value, str) and "\x00" in value:  # PostgreSQL text cannot hold NUL
            raise UserInputError(f"The {name} filter contains a NUL character; remove it.")
    documents = documents_visible(user=user).select_related("collection").defer("content")
    if collection is not None and collection != "":
        documents = documents.filter(collection=collection_get(user=user, collection=collection))
    if status:
        documents = documents.filter(status=status)
    if tag:
        documents = documents.filter(tags__contains=[tag])
    if search:
        documents = documents.filter(Q(title__icontains=search) | Q(source_filename__icontains=search))
    if created_after is not None:
        documents = documents.filter(created__gte=created_after)
    if created_before is not None:
        documents = documents.filter(created__lt=created_before)
    return documents.annotate(node_count=Count("nodes"))


# Orders a document list may be sorted by (a leading "-" reverses), as the pages name them.
DOCUMENT_SORTS = {
    "title": "title",
    "collection": "collection__name",
    "status": "status",
    "tokens": "token_count",
    "nodes": "node_count",
    "builder": "builder",
    "updated": "updated",
}


def documents_sorted(documents: QuerySet[Document], sort: str | None) -> QuerySet[Document]:
    """``documents`` in the order ``sort`` names ("-updated" by default; unknown names fall back)."""
    field = DOCUMENT_SORTS.get((sort or "").lstrip("-"))
    if field is None:
        return documents.order_by("-updated", "-id")
    return documents.order_by(f"-{field}" if (sort or "").startswith("-") else field, "-id")


def with_latest_job(documents: QuerySet[Document]) -> QuerySet[Document]:
    """Each document with its newest job's id, status, stage, progress and error (one query, no N+1).

    With the stage's counts and start for the progress words (``documents.progress_words``), and
    ``job_ahead``: the unfinished jobs of any owner created before it, its place in the one queue
    the workers serve (counted inside the same query)."""
    latest = IngestionJob.objects.filter(document=OuterRef("pk")).order_by("-created", "-id")
    ahead = (
        IngestionJob.objects.filter(
            status__in=[IngestionJob.Status.QUEUED, IngestionJob.Status.RUNNING],
            created__lt=OuterRef("job_created"),
        )
        .order_by()
        .annotate(count=Func(F("pk"), function="COUNT", output_field=IntegerField()))
        .values("count")
    )
    return documents.annotate(
        job_id=Subquery(latest.values("pk")[:1]),
        job_status=Subquery(latest.values("status")[:1]),
        job_stage=Subquery(latest.values("stage")[:1]),
        job_progress=Subquery(latest.values("progress")[:1]),
        job_error=Subquery(latest.values("error")[:1]),
        job_stage_done=Subquery(latest.values("stage_done")[:1]),
        job_stage_total=Subquery(latest.values("stage_total")[:1]),
        job_stage_started=Subquery(latest.values("stage_started")[:1]),
        job_created=Subquery(latest.values("created")[:1]),
    ).annotate(job_ahead=Subquery(ahead))


# Tags the corpus page offers in its filter: the most used ones (any other can still be typed in
# the address, ?tag=). Every tag would let one member's documents make every page megabytes long.
TAG_CHOICES_SHOWN = 200


def document_tags(*, user: Any, limit: int = TAG_CHOICES_SHOWN) -> list[str]:
    """The ``limit`` tags most used on the documents the user can see, sorted (for the filters)."""
    tags = (
        documents_visible(user=user)
        .annotate(tag=Func(F("tags"), function="unnest"))
        .values("tag")
        .annotate(uses=Count("*"))
        .order_by("-uses", "tag")
        .values_list("tag", flat=True)[:limit]
    )
    return sorted(tags)


def document_get(*, user: Any, pk: object) -> Document:
    """A visible document with its collection; ``NotFoundError`` when it does not exist or is not visible."""
    number = as_id(pk)
    document = (
        documents_visible(user=user)
        .select_related("collection")
        .annotate(node_count=Count("nodes"))
        .filter(pk=number)
        .first()
        if number is not None
        else None
    )
    if document is None:
        raise NotFoundError(f"There is no document {pk!r}. Use the id of a document you can see.")
    return document


def document_nodes(*, document: Document) -> QuerySet[Node]:
    return Node.objects.filter(document=document).defer("embedding").order_by("order")


def document_tree(*, document: Document, flat: bool = False) -> list[dict[str, Any]]:
    """The document's nodes as plain data in document order: a flat list with parent ids, or
    the root with nested ``children`` (one query either way); each with its ``pages``."""
    rows: list[dict[str, Any]] = [
        dict(row)
        for row in Node.objects.filter(document=document)
        .order_by("order")
        .values(
            "id",
            "parent",
            "kind",
            "depth",
            "title",
            "summary",
            "toc_path",
            "start_char",
            "end_char",
            "token_count",
            "edited",
            "excluded",
            "embedding_stale",
        )
    ]
    pages = page_finder(document.page_spans)
    for row in rows:
        row["pages"] = pages(row["start_char"], row["end_char"])
    if flat:
        return rows
    by_id = {row["id"]: row for row in rows}
    roots: list[dict[str, Any]] = []
    children: dict[int, list[dict[str, Any]]] = {row["id"]: [] for row in rows}
    for row in rows:
        row["children"] = children[row["id"]]
        (children[row["parent"]] if row["parent"] in by_id else roots).append(row)
    return roots


def document_history(*, document: Document) -> QuerySet[TreeEdit]:
    """The document's tree edits since it was last indexed, newest first, with who made and undid
    them. The node snapshots (``before`` / ``after``, large for an edit that renumbers a big
    tree) are deferred: read them from one edit at a time."""
    return (
        TreeEdit.objects.filter(document=document)
        .select_related("user", "undone_by")
        .defer("before", "after")
        .order_by("-id")
    )


# The edited node's row in an edit's before/after list, without the vector a before row may carry:
# read in the database, so the page never loads the whole lists (large when an edit renumbered).
_EDITED_ROW = (
    "(jsonb_path_query_first({table}.{column}, '$[*] ? (@.id == $id)',"
    " jsonb_build_object('id', {table}.arguments -> 'node')) - 'embedding')"
)


def document_history_shown(*, document: Document, limit: int = 20) -> QuerySet[TreeEdit]:
    """The latest ``limit`` edits as the document page shows them: each with the edited node's
    rows before and after (``node_before``, ``node_after``), its title and text now
    (``node_title``, ``node_text``; None once it is gone) and a move's new parent's title."""
    table = TreeEdit._meta.db_table
    current = Node.objects.filter(pk=OuterRef("node_id"))
    return (
        document_history(document=document)
        .annotate(
            node_id=Cast(KeyTextTransform("node", "arguments"), IntegerField()),
            parent_id=Cast(KeyTextTransform("parent", "arguments"), IntegerField()),
        )
        .annotate(
            node_before=RawSQL(
                _EDITED_ROW.format(table=table, column="before"), [], output_field=JSONField()
            ),
            node_after=RawSQL(_EDITED_ROW.format(table=table, column="after"), [], output_field=JSONField()),
            node_title=Subquery(current.values("title")[:1]),
            node_text=Subquery(current.annotate(opening=Left("content", 200)).values("opening")[:1]),
            parent_title=Subquery(Node.objects.filter(pk=OuterRef("parent_id")).values("title")[:1]),
        )[:limit]
    )


def excluded_spans(*, document_ids: Any) -> dict[int, list[tuple[int, int]]]:
    """Each document's excluded text as (start, end) character spans, in text order: what no
    answer may show, not even as context around a chunk (the partial index on excluded nodes)."""
    spans: dict[int, list[tuple[int, int]]] = {}
    rows = (
        Node.objects.filter(document_id__in=document_ids, excluded=True)
        .order_by("document_id", "start_char")
        .values_list("document_id", "start_char", "end_char")
    )
    for document_id, start, end in rows:
        spans.setdefault(document_id, []).append((start, end))
    return spans


def node_get(*, user: Any, pk: object, document: Document | None = None) -> Node:
    """The node, if ``user`` may see its document; with ``document``, only a node of that document.

    A surface that names a document and a node (a page or endpoint under the document's address)
    passes both: the rule that the node belongs to the document lives here, once, not in views.
    """
    number = as_id(pk)
    nodes = Node.objects.filter(document__in=documents_visible(user=user))
    if document is not None:
        nodes = nodes.filter(document_id=document.pk)
    node = (
        nodes.select_related("document", "document__collection").defer("embedding").filter(pk=number).first()
        if number is not None
        else None
    )
    if node is None:
        if document is not None:
            raise NotFoundError(
                f"There is no node {pk!r} in document {document.pk}. Use the id of a node of that "
                "document (see its tree)."
            )
        raise NotFoundError(f"There is no node {pk!r}. Use the id of a node of a document you can see.")
    return node


def document_edit_tree(*, document_id: int, content: str) -> EditTree:
    """The document's nodes loaded into the in-memory tree every edit works on (``content``: its text)."""
    rows = Node.objects.filter(document_id=document_id).values_list("id", *STATE_FIELDS)
    return EditTree((NodeState(*row) for row in rows), text=content, count_tokens=count_tokens)


def node_move_places(*, document: Document, node_id: int) -> list[MovePlace]:
    """Every place node ``node_id`` of ``document`` can move to besides its own, in outline order
    (none for the root; ``NotFoundError`` for a node not in it).

    The rule is the move's own (``EditTree.move_places`` keeps what ``move_refusal`` accepts), so
    ``services.nodes.node_move`` takes every place listed here and refuses every other.
    """
    return document_edit_tree(document_id=document.pk, content=document.content).move_places(node_id)


def job_get(*, user: Any, pk: object) -> IngestionJob:
    number = as_id(pk)
    job = (
        IngestionJob.objects.select_related("document")
        .filter(pk=number, document__in=documents_visible(user=user))
        .first()
        if number is not None
        else None
    )
    if job is None:
        raise NotFoundError(f"There is no ingestion job {pk!r}.")
    return job


def document_latest_job(*, document: Document) -> IngestionJob | None:
    return document.jobs.order_by("-created", "-id").first()


def job_queue_ahead(*, job: IngestionJob) -> int:
    """The unfinished jobs of any owner created before ``job``: its place in the one queue the
    workers serve (the rule ``with_latest_job`` counts for a list)."""
    return IngestionJob.objects.filter(
        status__in=[IngestionJob.Status.QUEUED, IngestionJob.Status.RUNNING], created__lt=job.created
    ).count()


def corpus_version() -> int:
    """The current corpus version (0 before the first write). Read by every query: plain SQL,
    as the query's other reads, since compiling the ORM's version of it cost a millisecond."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT version FROM {connection.ops.quote_name(CorpusVersion._meta.db_table)} WHERE id = 1"
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def as_id(value: object) -> int | None:
    """A primary key, or None; out-of-range numbers would make PostgreSQL raise, not match."""
    # isdecimal, not isdigit: int() refuses digits such as "³" that isdigit accepts.
    if isinstance(value, str) and value.strip().isdecimal():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63:
        return value
    return None


# Characters of a leaf's text read for its label in the review (never the whole passage).
_REVIEW_EXCERPT_CHARS = 160


def document_review_rows(*, document: Document) -> list[dict[str, Any]]:
    """Every node of the document as the tree review scores it, in document order (one query).

    Plain dicts with the fields of ``documents.review.ReviewNode``: the vector (a numpy
    array, or None), token count, title, summary, flags, and a leaf's opening characters instead
    of its text. Scored by ``document_review``.
    """
    from django.db.models.functions import Left

    rows = (
        Node.objects.filter(document=document)
        .order_by("order")
        .annotate(excerpt=Left("content", _REVIEW_EXCERPT_CHARS))
        .values(
            "id",
            "parent_id",
            "kind",
            "order",
            "title",
            "summary",
            "toc_path",
            "token_count",
            "embedding",
            "embedding_stale",
            "excluded",
            "excerpt",
        )
    )
    return [dict(row) for row in rows]


def document_review(*, document: Document) -> list[ReviewItem]:
    """The document's nodes worth a person's look, worst first (one query; ``documents.review``
    says what is flagged and why)."""
    return score_review(review_nodes(document_review_rows(document=document)))


def collection_index_state(collection_id: int) -> str:
    """The state of the collection's own HNSW index (``documents.services.collection_indexes``):
    'valid', 'invalid' (PostgreSQL's mark while a concurrent build runs, or after one failed) or
    'missing'."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
            [collection_index_name(collection_id)],
        )
        row = cursor.fetchone()
    if row is None:
        return "missing"
    return "valid" if row[0] else "invalid"


# What this process last saw of each collection's index, and when (time.monotonic()).
_index_ready_seen: dict[int, tuple[bool, float]] = {}


def collection_index_ready(collection_id: int, *, max_age_s: float = 0.0) -> bool:
    """Whether a query filtered to the collection can use its own HNSW index.

    ``max_age_s``: an answer this process saw at most that long ago will do. The query path
    takes one: the catalog lookup was a measurable share of a query, an index comes and goes rarely,
    and a stale answer costs only speed, never results (without the index the collection's
    filtered scan falls back to the other strategies). This process's own builds and drops
    forget what was seen (``forget_collection_index_states``).
    """
    now = time.monotonic()
    seen = _index_ready_seen.get(collection_id)
    if seen is not None and now - seen[1] <= max_age_s:
        return seen[0]
    ready = collection_index_state(collection_id) == "valid"
    _index_ready_seen[collection_id] = (ready, now)
    return ready


def forget_collection_index_states() -> None:
    _index_ready_seen.clear()


def invitations_for(*, user: Any) -> QuerySet[CollectionInvitation]:
    """The collections offered to ``user`` that they have not accepted yet, newest first
    (``documents.services.sharing``)."""
    if not getattr(user, "is_authenticated", False):
        return CollectionInvitation.objects.none()
    return (
        CollectionInvitation.objects.filter(
            Q(user_id=user.pk) | Q(user__isnull=True, username=user.get_username()), declined__isnull=True
        )
        .select_related("collection", "invited_by")
        .order_by("-created", "-id")
    )


def collection_invited(*, collection: Collection) -> list[str]:
    """The names invited to ``collection`` that have not answered yet, whether or not an account
    has that name (``documents.services.sharing``: the owner cannot tell)."""
    # .all() reads what a list prefetched (``prefetch_related("invitations__user")``): one query
    # for a whole page of collections, not one per collection.
    return [invitation.username for invitation in collection.invitations.all() if invitation.declined is None]
