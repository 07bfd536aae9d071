"""The corpus one query searches: collection, document and tag filters, checked against what
the user may read, resolved to the documents in scope: listed by id (a documents or tags filter),
or every document of some collections (a collection filter alone, a user's unfiltered query),
which are never listed: each statement keeps to them itself (``Scope.documents_sql``), so a
query over a collection of 100,000 documents reads no 100,000 ids.

Every mistake a caller can make here raises ``RetrievalInputError`` with a message that says what
was wrong and what to do instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import F, Func, QuerySet

from documents.models import Collection, Document
from documents.selectors import as_id, collection_get, collections_contents, collections_visible
from documents.services.document_input import TAG_MAX_CHARS, TAGS_MAX_COUNT
from openfable.errors import NotFoundError
from retrieval.result import RetrievalInputError, RetrievalNotFoundError


@dataclass(frozen=True)
class Scope:
    """The documents a query searches, and the filters and visibility it was resolved from."""

    # The documents in scope, listed (a documents or tags filter). None: not listed: every
    # document of ``whole_collections``, or of the corpus when that is None too.
    document_ids: list[int] | None
    filters: dict[str, Any]  # normalised, echoed in the result and part of the cache key
    visibility: str  # "all", "public" or "user:<id>"
    collection_id: int | None = None  # the one collection the documents lie in, when filtered to it
    # The collections whose documents are exactly the ones in scope, when that is so (a query
    # filtered by collection alone, or a user's unfiltered one), and how many of their documents
    # a query can search: their statistics are kept whole.
    whole_collections: tuple[int, ...] | None = None
    searchable_documents: int = 0

    @property
    def whole_collection(self) -> bool:
        """The documents are all of that collection's: a visible collection is visible whole, so
        the collection filter alone keeps every one of its documents."""
        return self.collection_id is not None and set(self.filters) == {"collection"}

    def documents_sql(self, id_column: str, *, collection_column: str | None = None) -> tuple[str, list[Any]]:
        """A condition that keeps a statement's rows to the documents in scope, and its
        parameters (``documents_condition``); "TRUE" for the whole corpus."""
        if self.document_ids is None and self.whole_collections is None:
            return "TRUE", []
        return documents_condition(
            id_column,
            document_ids=self.document_ids,
            collection_ids=self.whole_collections,
            collection_column=collection_column,
        )


def documents_condition(
    id_column: str,
    *,
    document_ids: Sequence[int] | None,
    collection_ids: Sequence[int] | None,
    collection_column: str | None = None,
) -> tuple[str, list[Any]]:
    """SQL that keeps ``id_column`` (a document id) to these documents, or else to every document
    of these collections, and its parameters. ``collection_column``, when the table has one,
    holds the document's collection: read directly instead of through the documents."""
    if document_ids is not None:
        return f"{id_column} = ANY(%s)", [list(document_ids)]
    collections = list(collection_ids or [])
    if collection_column is not None:
        return f"{collection_column} = ANY(%s)", [collections]
    # ARRAY(...) runs once, before the statement, as a list would be given: the plans stay those
    # of a list (an index scan by document, the HNSW scan filtered after the index).
    document_table = connection.ops.quote_name(Document._meta.db_table)
    return (
        f"{id_column} = ANY(ARRAY(SELECT id FROM {document_table} WHERE collection_id = ANY(%s)))",
        [collections],
    )


def _visible_collections(user: Any) -> tuple[QuerySet[Collection] | None, str]:
    """Collections a user may read (``documents.selectors``); None when that is all of them."""
    if user is None or getattr(user, "is_superuser", False):
        return None, "all"
    return collections_visible(user=user), f"user:{getattr(user, 'pk', None) or 'anonymous'}"


def resolve_scope(
    *, collection: str | int | None, documents: Sequence[int] | None, tags: Sequence[str] | None, user: Any
) -> Scope:
    """Check the filters against what ``user`` may read and resolve them to document ids.

    ``collection`` is a slug or id, ``documents`` ids, ``tags`` tags every document must carry;
    a bare id or tag counts as a list of one. Raises ``RetrievalInputError`` saying what was
    wrong for an unknown collection, document or tag, and for filters that match nothing
    together. No filters and no visibility limit leave the whole corpus in scope.
    """
    collections, visibility = _visible_collections(user)
    visible = (
        Document.objects.all() if collections is None else Document.objects.filter(collection__in=collections)
    )
    selected = visible
    filters: dict[str, Any] = {}
    collection_id: int | None = None
    if collection is not None and collection != "":
        found = _find_collection(collection, user)
        selected = selected.filter(collection=found)
        filters["collection"] = found.slug
        collection_id = found.pk
    if ids := _document_ids(documents, visible):
        selected = selected.filter(pk__in=ids)
        filters["documents"] = ids
    if wanted := _tags(tags, visible):
        selected = selected.filter(tags__contains=wanted)
        filters["tags"] = wanted
    if not filters and collections is None:
        return Scope(document_ids=None, filters={}, visibility=visibility)
    whole = _whole_collections(filters, collection_id, collections)
    if whole is None:
        ids = list(selected.order_by("pk").values_list("pk", flat=True))
        _refuse_if_nothing_matched(bool(ids), filters)
        return Scope(document_ids=ids, filters=filters, visibility=visibility, collection_id=collection_id)
    return _whole_collections_scope(
        whole, filters=filters, visibility=visibility, collection_id=collection_id
    )


def _whole_collections_scope(
    whole: tuple[int, ...], *, filters: dict[str, Any], visibility: str, collection_id: int | None
) -> Scope:
    """Every document of these collections, unlisted, with how many a query can search."""
    has_documents, searchable = collections_contents(whole) if whole else (False, 0)
    _refuse_if_nothing_matched(has_documents, filters)
    if not has_documents:  # no filter to blame (a user's collections are empty): nothing listed
        return Scope(document_ids=[], filters=filters, visibility=visibility, collection_id=collection_id)
    return Scope(
        document_ids=None,
        filters=filters,
        visibility=visibility,
        collection_id=collection_id,
        whole_collections=whole,
        searchable_documents=searchable,
    )


def _whole_collections(
    filters: dict[str, Any], collection_id: int | None, visible: QuerySet[Collection] | None
) -> tuple[int, ...] | None:
    """The collections whose documents are exactly the scope's, when that is so: the one a query
    is filtered to by collection alone, or every one a user may read for an unfiltered query."""
    if set(filters) == {"collection"} and collection_id is not None:
        return (collection_id,)
    if not filters and visible is not None:
        return tuple(sorted(visible.values_list("pk", flat=True)))
    return None


def _refuse_if_nothing_matched(anything: bool, filters: dict[str, Any]) -> None:
    """Filters that match no document together are refused, saying which."""
    if not anything and filters:
        described = "; ".join(f"{name}: {value}" for name, value in filters.items())
        raise RetrievalNotFoundError(
            f"No document matches all the filters together ({described}). Loosen one of them."
        )


def _document_ids(documents: Sequence[object] | int | str | None, visible: QuerySet[Document]) -> list[int]:
    """The ids of the documents filter, sorted, each checked to exist and be visible."""
    values: Sequence[object] | None = (
        [documents] if isinstance(documents, str | int) else documents
    )  # one id bare
    if not values:
        return []
    ids = sorted({_document_id(value) for value in values})
    existing = set(visible.filter(pk__in=ids).values_list("pk", flat=True))
    missing = [str(pk) for pk in ids if pk not in existing]
    if missing:
        raise RetrievalNotFoundError(
            f"No document with id {', '.join(missing)}. Use the ids of existing documents "
            "(see the document list), or leave the documents filter out."
        )
    return ids


def _tags(tags: Sequence[str] | str | None, visible: QuerySet[Document]) -> list[str]:
    """The tags filter, sorted and stripped, each checked to be carried by a visible document."""
    if isinstance(tags, str):
        tags = [tags]  # one tag given bare, not a sequence of characters
    if not tags:
        return []
    wanted = sorted({str(tag).strip() for tag in tags if str(tag).strip()})
    _check_tags(wanted)
    known = set(
        visible.filter(tags__overlap=wanted)
        .annotate(tag=Func(F("tags"), function="unnest"))
        .values_list("tag", flat=True)
    )
    unknown = [tag for tag in wanted if tag not in known]
    if unknown:
        raise RetrievalNotFoundError(
            f"No document has the tag {', '.join(repr(tag) for tag in unknown)}. "
            "Check the spelling (tags are case-sensitive) or leave the tag filter out."
        )
    return wanted


def _check_tags(wanted: list[str]) -> None:
    """A filter no document could match is refused before it reaches the database: more tags than
    a document carries (20,000 took 10 s), a tag longer than a tag can be, or NUL."""
    if len(wanted) > TAGS_MAX_COUNT:
        raise RetrievalInputError(
            f"The query filters by {len(wanted):,} tags; a document carries at most {TAGS_MAX_COUNT}, "
            "so no document could carry them all. Filter by fewer tags."
        )
    for tag in wanted:
        if len(tag) > TAG_MAX_CHARS:
            raise RetrievalInputError(
                f"The tag {tag[:40]!r}… is {len(tag):,} characters; tags hold at most {TAG_MAX_CHARS}."
            )
        if "\x00" in tag:
            raise RetrievalInputError("A tag contains NUL characters; tags are plain text.")


def _find_collection(value: str | int, user: Any) -> Collection:
    try:
        return collection_get(user=user, collection=value)
    except NotFoundError:
        raise RetrievalNotFoundError(
            f"There is no collection {value!r}. Use the slug or id of an existing collection "
            "(see the collection list), or leave the collection filter out."
        ) from None


def _document_id(value: object) -> int:
    number = as_id(value)
    if number is None:
        raise RetrievalInputError(f"Document ids are positive whole numbers; {value!r} is not one.")
    return number
