"""Reads of the corpus. Views, APIs and commands call these instead of building querysets."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from documents.models import Collection, CorpusVersion, Document, Node


def collection_list() -> QuerySet[Collection]:
    return Collection.objects.annotate(document_count=Count("documents")).order_by("name")


def document_list(*, collection: Collection | None = None) -> QuerySet[Document]:
    documents = Document.objects.select_related("collection").defer("content")
    if collection is not None:
        documents = documents.filter(collection=collection)
    return documents


def document_nodes(*, document: Document) -> QuerySet[Node]:
    return Node.objects.filter(document=document).defer("embedding").order_by("order")


def corpus_version() -> int:
    """The current corpus version (0 before the first write)."""
    row = CorpusVersion.objects.filter(pk=1).values_list("version", flat=True).first()
    return int(row or 0)
