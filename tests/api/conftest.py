from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from documents.models import Collection, Document
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from openfable.api_tokens import token_create
from tests.factories import CollectionFactory, UserFactory

GUIDE = (
    "# Field guide\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. Stratovolcanoes erupt explosively and build steep cones.\n"
)


class People:
    """An owner with a collection shared with a member, and a stranger; each with a token client."""

    def __init__(self) -> None:
        self.owner, self.member, self.stranger = (UserFactory.create() for _ in range(3))
        self.collection: Collection = CollectionFactory.create(
            name="Volcanoes", slug="volcanoes", owner=self.owner
        )
        self.collection.members.add(self.member)

    def client(self, user: Any) -> APIClient:
        _, key = token_create(user=user, name="tests")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client


@pytest.fixture
def people(db: None) -> People:
    return People()


@pytest.fixture
def indexed(people: People) -> Document:
    document = document_create(
        collection=people.collection, content=GUIDE, title="Guide", queue=False
    ).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded
    document.refresh_from_db()
    return document
