"""The corpus page: upload by paste or files, errors in the services' words, live progress rows,
filters, sorting, pages, delete / re-index / retry, and a bounded number of queries."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from documents.models import Document, IngestionJob
from documents.selectors import TAG_CHOICES_SHOWN
from tests.factories import CollectionFactory, DocumentFactory, IngestionJobFactory, NodeFactory, UserFactory

pytestmark = pytest.mark.django_db
HOME = reverse("documents:home")


@pytest.fixture
def user() -> Any:
    return UserFactory.create()


@pytest.fixture
def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_empty_corpus_says_what_to_do(signed_in: Client) -> None:
    body = signed_in.get(HOME).content.decode()
    assert "No documents yet" in body and "Add and index" in body


def test_pasted_text_is_added_to_the_users_own_collection(signed_in: Client, user: Any) -> None:
    response = signed_in.post(
        HOME, {"text": "# Tides\r\n\r\nHigh tide comes twice a day.\r\n", "tags": "sea, moon"}
    )
    assert response.status_code == 302
    document = Document.objects.get()
    assert document.content == "# Tides\n\nHigh tide comes twice a day.\n" and document.tags == [
        "moon",
        "sea",
    ]
    assert document.collection.owner == user and document.jobs.get().status == IngestionJob.Status.QUEUED
    page = signed_in.get(HOME).content.decode()
    assert "Added 1 document;" in page and "Tides" in page


def test_several_files_at_once_into_a_chosen_collection(signed_in: Client, user: Any) -> None:
    collection = CollectionFactory.create(owner=user, slug="notes")
    files = [
        SimpleUploadedFile("a.md", b"# A\n\nFirst file."),
        SimpleUploadedFile("b.txt", b"Second file."),
    ]
    response = signed_in.post(HOME, {"uploads": files, "collection": "notes"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert sorted(Document.objects.values_list("title", flat=True)) == ["a", "b"]
    assert all(document.collection == collection for document in Document.objects.all())
    body = response.content.decode()
    assert "<html" not in body, "an htmx request gets the fragment, not the page"
    assert 'id="document-' in body and 'hx-trigger="every 1s' in body
    assert "Added 2 documents; indexing has started." in body


def test_the_upload_form_stays_on_the_collection_just_used(signed_in: Client, user: Any) -> None:
    CollectionFactory.create(owner=user, slug="notes", name="Notes")
    answer = signed_in.post(HOME, {"text": "First note.", "collection": "notes"}, HTTP_HX_REQUEST="true")
    chosen = '<option value="notes" selected>Notes</option>'
    assert chosen in answer.content.decode(), "the fresh form under the table keeps the collection"
    assert chosen in signed_in.get(HOME).content.decode(), "and so does the next visit"


def test_adding_a_text_already_there_says_so_in_words(signed_in: Client) -> None:
    signed_in.post(HOME, {"text": "High tide comes twice a day."})
    signed_in.post(HOME, {"text": "High tide comes twice a day."})
    body = signed_in.get(HOME).content.decode()
    assert "Nothing new to add: that document is already in the collection." in body
    assert "document(s)" not in body and "1 were" not in body
    files = [
        SimpleUploadedFile("a.txt", b"High tide comes twice a day."),
        SimpleUploadedFile("b.txt", b"Low tide comes between."),
    ]
    signed_in.post(HOME, {"uploads": files})
    body = signed_in.get(HOME).content.decode()
    assert "Added 1 document; indexing has started. 1 document was already there." in body


@override_settings(MAX_DOCUMENT_BYTES=50)
@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"text": "   "}, "Paste some text or choose one or more files."),
        ({"text": "x" * 60}, "the limit is 50"),
        (
            {"uploads": [("ok.txt", b"fine"), ("bad.txt", b"\xff\xfe")]},
            "bad.txt: The file in bad.txt is not UTF-8",
        ),
        ({"text": "fine", "tags": "t" * 101}, "tags hold at most 100"),
    ],
)
def test_refusals_are_shown_beside_the_field_and_store_nothing(
    signed_in: Client, data: dict[str, Any], message: str
) -> None:
    if "uploads" in data:  # fresh file objects for each run: a read upload stays read
        data = {"uploads": [SimpleUploadedFile(name, content) for name, content in data["uploads"]]}
    response = signed_in.post(HOME, data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Document.objects.exists()


def test_a_row_polls_while_indexing_and_stops_when_done(signed_in: Client, user: Any) -> None:
    document = DocumentFactory.create(
        collection=CollectionFactory.create(owner=user), status=Document.Status.INDEXING
    )
    IngestionJobFactory.create(
        document=document, status=IngestionJob.Status.RUNNING, stage="embedding", progress=62
    )
    row = signed_in.get(reverse("documents:row", args=[document.pk])).content.decode()
    # Not while the tab is hidden (app.js: an htmx trigger filter would be eval, refused by the CSP).
    assert 'hx-trigger="every 1s" data-poll-when-visible' in row
    assert 'value="62"' in row and "Embedding passages · 18 % of this step" in row
    Document.objects.filter(pk=document.pk).update(status=Document.Status.INDEXED)
    IngestionJob.objects.filter(document=document).update(status=IngestionJob.Status.SUCCEEDED, progress=100)
    done = signed_in.get(reverse("documents:row", args=[document.pk])).content.decode()
    assert "hx-trigger" not in done and "Indexed" in done


def test_a_failed_job_shows_its_error_and_a_retry(signed_in: Client, user: Any) -> None:
    document = DocumentFactory.create(
        collection=CollectionFactory.create(owner=user), status=Document.Status.FAILED
    )
    IngestionJobFactory.create(
        document=document,
        status=IngestionJob.Status.FAILED,
        error="The model timed out.",
        builder_requested="structural",
    )
    page = signed_in.get(HOME).content.decode()
    assert "The model timed out." in page and ">Retry<" in page
    signed_in.post(reverse("documents:reindex", args=[document.pk]))
    retried = IngestionJob.objects.filter(document=document).order_by("-id").first()
    assert (
        retried is not None
        and retried.status == IngestionJob.Status.QUEUED
        and retried.builder_requested == "structural"
    )


def test_delete_and_reindex(signed_in: Client, user: Any) -> None:
    document = DocumentFactory.create(
        collection=CollectionFactory.create(owner=user), status=Document.Status.INDEXED
    )
    response = signed_in.post(reverse("documents:reindex", args=[document.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "Queued" in response.content.decode()
    assert signed_in.post(reverse("documents:delete", args=[document.pk])).status_code == 302
    assert not Document.objects.exists()


def test_someone_elses_documents_cannot_be_touched(signed_in: Client) -> None:
    theirs = DocumentFactory.create(collection=CollectionFactory.create(owner=UserFactory.create()))
    for name in ("row",):
        assert signed_in.get(reverse(f"documents:{name}", args=[theirs.pk])).status_code == 404
    for name in ("delete", "reindex"):
        assert signed_in.post(reverse(f"documents:{name}", args=[theirs.pk])).status_code == 404
    assert Document.objects.filter(pk=theirs.pk).exists() and not theirs.jobs.exists()


def test_filters_sorting_and_pages(signed_in: Client, user: Any) -> None:
    mine = CollectionFactory.create(owner=user, slug="mine", name="Mine")
    for index in range(30):
        DocumentFactory.create(
            collection=mine, title=f"Doc {index:02d}", tags=["odd"] if index % 2 else ["even"]
        )
    first = signed_in.get(HOME, {"sort": "title"}).content.decode()
    assert first.index("Doc 00") < first.index("Doc 01") and "Doc 29" not in first and "Page 1 of 2" in first
    assert "Doc 29" in signed_in.get(HOME, {"sort": "title", "page": "2"}).content.decode()
    odd = signed_in.get(HOME, {"tag": "odd"}).content.decode()
    assert "Doc 01" in odd and "Doc 02" not in odd
    assert "Doc 07" in signed_in.get(HOME, {"q": "doc 07"}).content.decode()
    assert (
        "No document matches these filters" in signed_in.get(HOME, {"q": "nothing like it"}).content.decode()
    )


def test_the_page_costs_a_bounded_number_of_queries(
    signed_in: Client, user: Any, django_assert_max_num_queries: Any
) -> None:
    collection = CollectionFactory.create(owner=user)
    for index in range(100):
        document = DocumentFactory.create(collection=collection, tags=[f"t{index % 7}"])
        IngestionJobFactory.create(document=document)
        for order in range(5):
            NodeFactory.create(
                document=document,
                order=order,
                kind="root" if order == 0 else "leaf",
                depth=0 if order == 0 else 1,
                parent=None if order == 0 else document.nodes.get(order=0),
            )
    with django_assert_max_num_queries(12):
        assert signed_in.get(HOME).status_code == 200


def test_the_tag_filter_offers_the_most_used_tags_and_the_chosen_one(signed_in: Client, user: Any) -> None:
    """Every tag of every visible document made one member's 100,000 tags a 7 MB page for all."""
    collection = CollectionFactory.create(owner=user)
    for index in range(6):  # 295 different tags: "common" on each document, 49 of its own
        DocumentFactory.create(
            collection=collection, tags=["common", *(f"rare-{index}-{n:02d}" for n in range(49))]
        )
    page = signed_in.get(HOME, {"tag": "rare-5-48"}).content.decode()
    offered = re.findall(r'<option value="((?:common|rare-)[^"]*)"( selected)?', page)
    assert len(offered) == TAG_CHOICES_SHOWN + 1, "the most used tags, and the chosen one beside them"
    assert ("common", "") in offered and ("rare-5-48", " selected") in offered


def _text(html: str) -> str:
    """What a person reads: the tags gone, the spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_a_queued_row_says_how_many_documents_are_ahead_of_it(signed_in: Client, user: Any) -> None:
    # The queue is every owner's: one set of workers serves them all. Finished jobs and jobs
    # created later are not ahead of it.
    now = timezone.now()
    jobs = [
        (IngestionJob.Status.RUNNING, now - timedelta(minutes=5)),
        (IngestionJob.Status.QUEUED, now - timedelta(minutes=4)),
        (IngestionJob.Status.SUCCEEDED, now - timedelta(minutes=3)),
        (IngestionJob.Status.QUEUED, now + timedelta(minutes=1)),
    ]
    for status, created in jobs:
        job = IngestionJobFactory.create(status=status)
        IngestionJob.objects.filter(pk=job.pk).update(created=created)
    document = DocumentFactory.create(
        collection=CollectionFactory.create(owner=user), status=Document.Status.QUEUED
    )
    IngestionJobFactory.create(document=document, status=IngestionJob.Status.QUEUED)
    IngestionJob.objects.filter(document=document).update(created=now - timedelta(minutes=2))

    row = _text(signed_in.get(reverse("documents:row", args=[document.pk])).content.decode())
    assert "Waiting to start · 2 documents ahead" in row
    page = _text(signed_in.get(HOME).content.decode())
    assert "Waiting to start · 2 documents ahead" in page
    assert "queued queued" not in page.lower() and "queued ·" not in page.lower()


def test_a_row_mid_embedding_counts_passages_and_says_the_time_left(signed_in: Client, user: Any) -> None:
    document = DocumentFactory.create(
        collection=CollectionFactory.create(owner=user), status=Document.Status.INDEXING
    )
    job = IngestionJobFactory.create(
        document=document,
        status=IngestionJob.Status.RUNNING,
        stage="embedding",
        progress=85,
        stage_done=120,
        stage_total=156,
        stage_started=timezone.now() - timedelta(minutes=10),
    )
    row = _text(signed_in.get(reverse("documents:row", args=[document.pk])).content.decode())
    # 120 passages in 10 minutes: the other 36 take about 3.
    assert "Embedding 120 of 156 passages · about 3 minutes left" in row
    assert "ahead" not in row

    # Only a moment into the stage there is no rate yet, and no number is made up.
    IngestionJob.objects.filter(pk=job.pk).update(stage_done=16, stage_started=timezone.now())
    row = _text(signed_in.get(reverse("documents:row", args=[document.pk])).content.decode())
    assert "Embedding 16 of 156 passages" in row and "left" not in row


def test_job_progress_records_the_stage_counts_and_when_the_stage_began(user: Any) -> None:
    from documents.services.jobs import job_claim, job_progress

    document = DocumentFactory.create(collection=CollectionFactory.create(owner=user))
    IngestionJobFactory.create(document=document)
    job = job_claim(document_id=document.pk)
    assert job is not None
    job_progress(job, "embedding", 0.0, done=0, total=156)
    began = IngestionJob.objects.get(pk=job.pk).stage_started
    assert began is not None
    job_progress(job, "saving")  # a new stage: counts cleared, a new start
    job_progress(job, "embedding", 120 / 156, done=120, total=156)
    stored = IngestionJob.objects.get(pk=job.pk)
    assert (stored.stage, stored.stage_done, stored.stage_total) == ("embedding", 120, 156)
    assert stored.stage_started is not None and stored.stage_started > began


def test_many_indexing_documents_cost_a_bounded_number_of_queries(
    signed_in: Client, user: Any, django_assert_max_num_queries: Any
) -> None:
    collection = CollectionFactory.create(owner=user)
    for index in range(25):
        running = index % 2 == 0
        document = DocumentFactory.create(
            collection=collection, status=Document.Status.INDEXING if running else Document.Status.QUEUED
        )
        IngestionJobFactory.create(
            document=document,
            status=IngestionJob.Status.RUNNING if running else IngestionJob.Status.QUEUED,
            stage="embedding" if running else "queued",
            stage_done=index,
            stage_total=100,
            stage_started=timezone.now() - timedelta(minutes=1),
        )
    with django_assert_max_num_queries(12):
        page = _text(signed_in.get(HOME).content.decode())
    assert page.count("passages") == 13 and page.count("ahead") + page.count("next in line") == 12
