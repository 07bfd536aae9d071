"""document_create: the one entry point, its refusals and its duplicate handling; the services
package names every module it holds."""

from __future__ import annotations

import pkgutil
import re
from collections.abc import Callable

import pytest
from django.test import override_settings

import documents.services
from documents.models import Document, IngestionJob
from documents.selectors import corpus_version
from documents.services.document_input import DocumentInputError
from documents.services.documents import document_create
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
    # The first job still waits in the queue: it is the re-index (one build per document).
    assert reindexed.job is not None and reindexed.job.reindex and reindexed.job == first.job
    assert IngestionJob.objects.count() == 1
    IngestionJob.objects.update(status=IngestionJob.Status.SUCCEEDED)
    reindexed = document_create(collection=collection, content="Same text.", reindex=True, queue=False)
    assert reindexed.job is not None and reindexed.job.reindex and reindexed.job != first.job
    assert IngestionJob.objects.count() == 2
    assert Document.objects.count() == 1


def test_corpus_version_moves() -> None:
    assert corpus_version_bump() + 1 == corpus_version_bump()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"content": None}, "The document text is missing"),
        ({"content": 42}, "must be a string, not int"),
        ({"content": "half an emoji \ud83d here"}, "lone surrogate"),
        ({"content": "fine", "metadata": "{not json"}, "metadata is not valid JSON"),
        ({"content": "fine", "metadata": [1, 2]}, "metadata must be a JSON object"),
        ({"content": "fine", "metadata": {"when": {1, 2}}}, "cannot be stored as JSON"),
        ({"content": "fine", "tags": ["x" * 101]}, "tags hold at most 100"),
        ({"content": "fine", "title": "t" * 501}, "titles hold at most 500"),
        ({"content": "fine", "builder": "magic"}, "Unknown builder 'magic'"),
    ],
)
def test_every_bad_field_is_refused_with_a_message_not_a_traceback(
    fields: dict[str, object], message: str
) -> None:
    collection = CollectionFactory.create()
    with pytest.raises(DocumentInputError, match=message):
        document_create(collection=collection, queue=False, **fields)  # type: ignore[arg-type]
    assert not Document.objects.exists()


def test_a_refused_document_leaves_no_default_collection_behind() -> None:
    from documents.models import Collection

    with pytest.raises(DocumentInputError):
        document_create(collection=None, content="   ", queue=False)
    assert not Collection.objects.exists()
    created = document_create(collection=None, content="Some text.", queue=False)
    assert created.document.collection.slug == "default"


def test_metadata_given_as_json_text_is_stored_as_an_object() -> None:
    document = document_create(
        collection=CollectionFactory.create(), content="x y z", metadata='{"source": "web"}', queue=False
    ).document
    assert document.metadata == {"source": "web"}


def test_update_changes_only_the_description_and_moves_the_version() -> None:
    from documents.services.documents import document_update

    document = document_create(
        collection=CollectionFactory.create(), content="Line one\nLine two\n", queue=False
    ).document
    before = corpus_version()
    document_update(document=document, title="New title", tags=["b", "a", "a"], metadata={"k": 1})
    document.refresh_from_db()
    assert (document.title, document.tags, document.metadata) == ("New title", ["a", "b"], {"k": 1})
    assert document.content == "Line one\nLine two\n" and corpus_version() > before
    with pytest.raises(DocumentInputError, match="needs a title"):
        document_update(document=document, title="  ")


def test_delete_removes_the_document_and_moves_the_version() -> None:
    from documents.services.documents import document_delete

    document = document_create(
        collection=CollectionFactory.create(), content="Some text.", queue=False
    ).document
    before = corpus_version()
    document_delete(document=document)
    assert not Document.objects.exists() and not IngestionJob.objects.exists()
    assert corpus_version() > before


def test_only_a_failed_job_can_be_retried_and_retrying_queues_a_new_one() -> None:
    from documents.services.documents import job_retry
    from openfable.errors import ConflictError

    result = document_create(collection=CollectionFactory.create(), content="Some text.", queue=False)
    assert result.job is not None
    with pytest.raises(ConflictError, match="only a failed job can be retried"):
        job_retry(job=result.job, queue=False)
    IngestionJob.objects.filter(pk=result.job.pk).update(
        status=IngestionJob.Status.FAILED, builder_requested="structural"
    )
    result.job.refresh_from_db()
    retried = job_retry(job=result.job, queue=False)
    assert retried.pk != result.job.pk and retried.status == IngestionJob.Status.QUEUED
    assert retried.builder_requested == "structural" and retried.reindex


@pytest.mark.parametrize(("slug", "message"), [("12", "all digits"), ("Bad Slug", "lowercase letters")])
def test_collection_slugs_that_would_be_ambiguous_are_refused(slug: str, message: str) -> None:
    from documents.services.collections import collection_create

    with pytest.raises(DocumentInputError, match=message):
        collection_create(name="Reports", slug=slug)


def test_the_services_package_names_every_module_it_holds() -> None:
    listed = set(re.findall(r"^- ``(\w+)``", documents.services.__doc__ or "", re.M))
    held = {module.name for module in pkgutil.iter_modules(documents.services.__path__)}
    assert listed == held
