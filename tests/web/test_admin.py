"""Every admin page renders for a superuser."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pytest
from django.test import Client, override_settings
from django.urls import reverse

from documents.models import Document, IngestionJob, Node
from documents.selectors import corpus_version
from tests.cli import run_openfable
from tests.factories import CollectionFactory, DocumentFactory, IngestionJobFactory, NodeFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("model", "can_add"), [("collection", True), ("document", True), ("node", False), ("ingestionjob", False)]
)
def test_changelist_and_add_pages_render(admin_client: Client, model: str, can_add: bool) -> None:
    DocumentFactory.create(tags=["finance"])
    assert admin_client.get(reverse(f"admin:documents_{model}_changelist")).status_code == 200
    assert admin_client.get(reverse(f"admin:documents_{model}_changelist"), {"q": "x"}).status_code == 200
    # Nodes come from ingestion and jobs from uploads: the admin cannot make them by hand.
    assert admin_client.get(reverse(f"admin:documents_{model}_add")).status_code == (200 if can_add else 403)


def test_document_page_shows_its_jobs_and_nodes(admin_client: Client) -> None:
    document = DocumentFactory.create(tags=["law"])
    NodeFactory.create(
        document=document, order=0, title="The root title", embedding=np.ones(384) / np.sqrt(384)
    )
    IngestionJobFactory.create(document=document, error="boom: the model timed out")
    page = admin_client.get(reverse("admin:documents_document_change", args=[document.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "The root title" in body and "boom: the model timed out" in body


def test_node_page_shows_the_embedding_read_only(admin_client: Client) -> None:
    node = NodeFactory.create(order=0, embedding=np.ones(384) / np.sqrt(384))
    page = admin_client.get(reverse("admin:documents_node_change", args=[node.pk]))
    assert page.status_code == 200
    assert "(384 dimensions)" in page.content.decode()
    assert 'name="embedding"' not in page.content.decode()


def test_document_list_filters_by_tag_status_and_builder(admin_client: Client) -> None:
    DocumentFactory.create(title="tagged one", tags=["medical"])
    DocumentFactory.create(title="other one", tags=["law"])
    page = admin_client.get(
        reverse("admin:documents_document_changelist"), {"tag": "medical", "status": "queued"}
    )
    body = page.content.decode()
    assert "tagged one" in body and "other one" not in body


# -- every write goes through the services --------------------------------------------------------

TEXT = "# Tide tables\r\n\r\nHigh tide comes twice a day.\r\n\r\nThe moon pulls the water.\r\n"


def _add_document(admin_client: Client, collection_pk: int, content: str, **extra: str) -> Any:
    data = {"collection": collection_pk, "title": "", "content": content, "tags_text": "", "metadata": "{}"}
    data.update(extra)
    return admin_client.post(reverse("admin:documents_document_add"), data)


@pytest.mark.django_db(transaction=True)
def test_a_document_added_in_the_admin_is_indexed_like_any_upload(
    admin_client: Client, eager_tasks: None
) -> None:
    collection = CollectionFactory.create()
    response = _add_document(admin_client, collection.pk, TEXT, tags_text="sea, moon")
    assert response.status_code == 302, response.content.decode()[:2000]
    document = Document.objects.get()
    # The browser's CRLF line ends are stored as LF, and the hash matches what is stored.
    assert document.content == TEXT.replace("\r\n", "\n")
    assert document.content_hash == hashlib.sha256(document.content.encode()).hexdigest()
    assert document.tags == ["moon", "sea"] and document.title == "Tide tables"
    job = IngestionJob.objects.get(document=document)
    assert job.status == IngestionJob.Status.SUCCEEDED, job.error
    assert document.nodes.filter(kind=Node.Kind.LEAF).exists()
    document.refresh_from_db()
    assert document.status == Document.Status.INDEXED


def test_a_second_document_in_the_same_collection_is_no_500(admin_client: Client) -> None:
    collection = CollectionFactory.create()
    assert _add_document(admin_client, collection.pk, "First text.").status_code == 302
    assert _add_document(admin_client, collection.pk, "Second text.").status_code == 302
    assert Document.objects.filter(collection=collection).count() == 2
    # The same text again is the same document, not an IntegrityError.
    assert _add_document(admin_client, collection.pk, "First text.").status_code == 302
    assert Document.objects.filter(collection=collection).count() == 2


@override_settings(MAX_DOCUMENT_BYTES=20)
@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ("x" * 21, {}, "the limit is 20"),
        ("   ", {}, "The document is empty"),
        ("fine", {"tags_text": "t" * 101}, "tags hold at most 100"),
        ("fine", {"tags_text": ",".join(f"t{i}" for i in range(51))}, "at most 50"),
        ("fine", {"metadata": "[" * 10_000 + "]" * 10_000}, "nested too deeply to read"),
        ("fine", {"metadata": '{"a": "b\\u0000c"}'}, "NUL character"),
    ],
)
def test_bad_input_is_refused_with_the_services_words(
    admin_client: Client, content: str, extra: dict[str, str], message: str
) -> None:
    response = _add_document(admin_client, CollectionFactory.create().pk, content, **extra)
    assert response.status_code == 200 and message in response.content.decode()
    assert not Document.objects.exists()


def test_editing_an_indexed_document_never_rewrites_its_text_or_status(admin_client: Client) -> None:
    content = "Line one.\n\nLine two.\n"
    document = DocumentFactory.create(content=content, status=Document.Status.INDEXED, tags=["a"])
    page = admin_client.get(reverse("admin:documents_document_change", args=[document.pk]))
    body = page.content.decode()
    assert 'name="content"' not in body and 'name="status"' not in body
    response = admin_client.post(
        reverse("admin:documents_document_change", args=[document.pk]),
        # A browser would send the text back as CRLF had it been a field; and a forged status.
        {
            "title": "Renamed",
            "tags_text": "b, c",
            "metadata": '{"k": 1}',
            "content": "x\r\n",
            "status": "failed",
            **{
                f"{inline}-{count}_FORMS": 0 for inline in ("jobs", "nodes") for count in ("TOTAL", "INITIAL")
            },
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    document.refresh_from_db()
    assert (document.title, document.tags, document.metadata) == ("Renamed", ["b", "c"], {"k": 1})
    assert document.content == content and document.status == Document.Status.INDEXED


def test_a_node_title_edited_in_the_admin_goes_through_node_update(
    admin_client: Client, django_capture_on_commit_callbacks: Any
) -> None:
    document = DocumentFactory.create(content="x" * 10)
    root = NodeFactory.create(document=document, order=0, title="Root", summary="All of it.")
    before = corpus_version()
    with django_capture_on_commit_callbacks() as queued:
        response = admin_client.post(
            reverse("admin:documents_node_change", args=[root.pk]),
            {"title": "Edited root", "summary": "All of it, edited.", "start_char": "5"},
        )
    assert response.status_code == 302, response.content.decode()[:2000]
    root.refresh_from_db()
    assert root.title == "Edited root" and root.edited and root.embedding_stale
    assert root.start_char == 0, "offsets are read-only"
    assert corpus_version() > before and len(queued) == 1


def test_reindex_and_retry_actions_queue_new_jobs(admin_client: Client) -> None:
    indexed = DocumentFactory.create(status=Document.Status.INDEXED)
    failed = DocumentFactory.create(status=Document.Status.FAILED)
    IngestionJobFactory.create(document=failed, status=IngestionJob.Status.FAILED, error="boom")
    changelist = reverse("admin:documents_document_changelist")
    admin_client.post(changelist, {"action": "reindex", "_selected_action": [indexed.pk]})
    admin_client.post(changelist, {"action": "retry_failed", "_selected_action": [failed.pk, indexed.pk]})
    assert (
        IngestionJob.objects.filter(document=indexed, status=IngestionJob.Status.QUEUED, reindex=True).count()
        == 1
    )
    assert IngestionJob.objects.filter(document=failed, status=IngestionJob.Status.QUEUED).count() == 1
    failed.refresh_from_db()
    assert failed.status == Document.Status.QUEUED


def test_deleting_in_the_admin_moves_the_corpus_version(admin_client: Client) -> None:
    document = DocumentFactory.create()
    before = corpus_version()
    response = admin_client.post(
        reverse("admin:documents_document_delete", args=[document.pk]), {"post": "yes"}
    )
    assert response.status_code == 302
    assert not Document.objects.exists() and corpus_version() > before


def test_a_file_added_in_the_admin_keeps_its_original_and_is_read_by_the_job(
    admin_client: Client, file_storage: Any
) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    from documents.services.jobs import job_run_now
    from tests.documents.ingestion import document_files as files

    collection = CollectionFactory.create()
    data = files.report_pdf(pages=2)
    response = admin_client.post(
        reverse("admin:documents_document_add"),
        {
            "collection": collection.pk,
            "title": "",
            "content": "",
            "upload": SimpleUploadedFile("report.pdf", data),
            "tags_text": "",
            "metadata": "{}",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    document = Document.objects.get()
    assert document.format == "pdf" and document.title == "report" and document.original.read() == data
    assert job_run_now(document_id=document.pk).succeeded  # type: ignore[union-attr]
    page = admin_client.get(reverse("admin:documents_document_change", args=[document.pk])).content.decode()
    assert reverse("documents:original", args=[document.pk]) in page and "report.pdf" in page

    both = admin_client.post(
        reverse("admin:documents_document_add"),
        {
            "collection": collection.pk,
            "content": "Some text.",
            "upload": SimpleUploadedFile("x.pdf", data),
            "metadata": "{}",
        },
    )
    assert both.status_code == 200 and "either the text or a file" in both.content.decode()
    old = admin_client.post(
        reverse("admin:documents_document_add"),
        {
            "collection": collection.pk,
            "upload": SimpleUploadedFile("old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 64),
            "metadata": "{}",
        },
    )
    assert old.status_code == 200 and "save it as .docx or PDF" in old.content.decode()
    assert Document.objects.count() == 1


def test_an_admin_save_between_apply_chunks_and_apply_tree_keeps_the_chunks(
    admin_client: Client, tmp_path: Any
) -> None:
    text = "# Tides\n\nHigh tide comes twice a day.\n\n## Moon\n\nThe moon pulls the water.\n"
    (tmp_path / "tides.md").write_text(text)
    (tmp_path / "markers.txt").write_text("## Moon\n")
    status, planned = run_openfable("plan", str(tmp_path / "tides.md"))
    assert status == 0, planned
    document_id = planned["document_id"]
    assert run_openfable("apply-chunks", str(document_id), str(tmp_path / "markers.txt"))[0] == 0

    response = admin_client.post(
        reverse("admin:documents_document_change", args=[document_id]),
        {
            "title": "Tides",
            "tags_text": "",
            "metadata": '{"k": 1}',
            **{
                f"{inline}-{count}_FORMS": 0 for inline in ("jobs", "nodes") for count in ("TOTAL", "INITIAL")
            },
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]

    tree = {
        "title": "Tides",
        "summary": "Tides and the moon.",
        "sections": [
            {"title": "Tides", "summary": "Twice a day.", "chunks": [0], "sections": []},
            {"title": "Moon", "summary": "It pulls the water.", "chunks": [1], "sections": []},
        ],
    }
    (tmp_path / "tree.json").write_text(json.dumps(tree))
    status, saved = run_openfable("apply-tree", str(document_id), str(tmp_path / "tree.json"))
    assert status == 0, saved
    assert saved["leaves"] == 2 and Document.objects.get(pk=document_id).metadata == {"k": 1}
