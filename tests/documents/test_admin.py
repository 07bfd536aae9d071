"""Every admin page renders for a superuser."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import DocumentFactory, IngestionJobFactory, NodeFactory

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
