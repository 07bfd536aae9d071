"""The question box of a document page (issue 22 item 8), over HTTP: the answer fragment, a bad
budget in words, someone else's document a 404, and the query page when JavaScript is off."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from documents.models import Document
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from tests.factories import CollectionFactory, UserFactory

pytestmark = pytest.mark.django_db
GUIDE = (
    "# Field guide\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. Stratovolcanoes erupt explosively and build steep cones.\n"
)


@pytest.fixture
def owner() -> Any:
    return UserFactory.create()


@pytest.fixture
def guide(owner: Any) -> Document:
    collection = CollectionFactory.create(owner=owner, slug="volcanoes")
    document = document_create(collection=collection, content=GUIDE, title="Guide", queue=False).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded
    return document


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _ask(client: Client, document: Document, **params: str) -> Any:
    url = reverse("retrieval:document-ask", args=[document.pk])
    return client.get(url, {"mode": "vector", "budget": "2000", **params}, HTTP_HX_REQUEST="true")


def test_the_document_page_has_the_question_box(owner: Any, guide: Document) -> None:
    body = _client(owner).get(reverse("documents:detail", args=[guide.pk])).content.decode()
    assert 'id="ask-query"' in body and 'name="budget"' in body and 'name="mode"' in body
    assert reverse("retrieval:document-ask", args=[guide.pk]) in body


def test_the_answer_gives_the_spans_to_mark(owner: Any, guide: Document) -> None:
    response = _ask(_client(owner), guide, query="How do stratovolcanoes erupt?")
    assert response.status_code == 200
    body = response.content.decode()
    found = re.search(r'<script id="answer-spans" type="application/json">(.*?)</script>', body, re.S)
    assert found is not None
    spans = json.loads(found.group(1))
    assert spans and all(0 <= span["start"] < span["end"] <= len(GUIDE) for span in spans)
    assert {span["node"] for span in spans} <= set(guide.nodes.values_list("pk", flat=True))


def test_a_bad_budget_is_refused_in_words(owner: Any, guide: Document) -> None:
    response = _ask(_client(owner), guide, query="eruptions", budget="lots")
    assert response.status_code == 200  # htmx swaps the message in place
    assert 'role="alert"' in response.content.decode()


def test_someone_elses_document_is_a_404(guide: Document) -> None:
    stranger = UserFactory.create()
    assert _ask(_client(stranger), guide, query="eruptions").status_code == 404


def test_without_javascript_the_query_page_answers_for_this_document(owner: Any, guide: Document) -> None:
    url = reverse("retrieval:document-ask", args=[guide.pk])
    response = _client(owner).get(url, {"query": "eruptions", "budget": "500", "mode": ""})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("retrieval:query"))
    assert f"documents={guide.pk}" in response["Location"]
