"""document_create: the one entry point, its refusals and its duplicate handling."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import override_settings

from documents.models import Document, IngestionJob
from documents.selectors import corpus_version
from documents.services.documents import DocumentInputError, document_create
from documents.services.trees import corpus_version_bump
from openfable.errors import NotFoundError
from tests.factories import CollectionFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "The document is empty"),
        ("  \n\t \n", "The document is empty"),
        (b"caf\xe9 au lait", "is not UTF-8 text (invalid byte at position 3)"),
        ("nul\x00byte", "NUL characters"),
    ],
)
def test_bad_content_is_refused_with_a_clear_message(content: str | bytes, message: str) -> None:
    collection = CollectionFactory.create()
    with pytest.raises(DocumentInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        document_create(collection=collection, content=content, queue=False)
    assert not Document.objects.exists()


@override_settings(MAX_DOCUMENT_BYTES=10)
def test_text_over_the_size_limit_is_refused() -> None:
    with pytest.raises(DocumentInputError, match=r"the limit is 10 .*OPENFABLE_MAX_DOCUMENT_BYTES"):
        document_create(collection=CollectionFactory.create(), content="x" * 11, queue=False)


def test_an_unknown_collection_is_refused() -> None:
    with pytest.raises(NotFoundError, match="There is no collection 'nope'"):
        document_create(collection="nope", content="Some text.", queue=False)


def test_create_stores_a_queued_document_and_queues_ingestion_after_commit(
    django_capture_on_commit_callbacks: Callable[..., object],
) -> None:
    collection = CollectionFactory.create(slug="law")
    before = corpus_version()
    with django_capture_on_commit_callbacks() as callbacks:  # type: ignore[attr-defined]
        result = document_create(
            collection="law",
            content=b"# Title\n\nBody text.",
            source_filename="notes/brief.md",
            tags=["b", "a", "a"],
        )
    assert result.created and result.job is not None
    document = result.document
    assert document.collection == collection
    assert document.status == Document.Status.QUEUED
    assert document.title == "brief" and document.tags == ["a", "b"]
    assert document.token_count > 0 and len(document.content_hash) == 64
    assert len(callbacks) == 1, "the Celery task is queued on commit"
    assert corpus_version() > before


def test_the_same_text_returns_the_existing_document_unless_reindex_is_asked() -> None:
    collection = CollectionFactory.create()
    first = document_create(collection=collection, content="Same text.", queue=False)
    again = document_create(collection=collection, content="Same text.", queue=False)
    assert not again.created and again.document.pk == first.document.pk and again.job is None
    assert IngestionJob.objects.count() == 1
    reindexed = document_create(collection=collection, content="Same text.", reindex=True, queue=False)
    assert reindexed.job is not None and reindexed.job.reindex
    assert IngestionJob.objects.count() == 2
    assert Document.objects.count() == 1


def test_corpus_version_moves() -> None:
    assert corpus_version_bump() + 1 == corpus_version_bump()
