"""One per-user request rate on every surface (issue 33 item 3): the query page and "Ask this
document" count in the same budget as the REST API (and so MCP, tests/mcp_server/test_rate_limit.py),
and a throttled page answers 429 with Retry-After and the message in words, in the fragment htmx
swaps in as in the whole page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import caches
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from documents.models import Document
from documents.services.documents import document_create
from tests.factories import CollectionFactory, UserFactory

pytestmark = pytest.mark.django_db
RATE = 3
QUERY = reverse("retrieval:query")


@pytest.fixture
def owner(settings: Settings) -> Iterator[Any]:
    user = UserFactory.create()
    settings.API_THROTTLE_RATES = {user.username: f"{RATE}/minute"}
    caches["rate_limit"].clear()
    yield user
    caches["rate_limit"].clear()


@pytest.fixture
def document(owner: Any) -> Document:
    collection = CollectionFactory.create(owner=owner, slug="notes")
    # Not indexed: a question about it finds nothing, which is all these tests need to count.
    return document_create(collection=collection, content="Plain notes.", title="Notes", queue=False).document


def _web(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _rest(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _query_page(client: Client, *, htmx: bool = False) -> Any:
    headers = {"HX-Request": "true"} if htmx else {}
    return client.get(QUERY, {"query": "notes", "budget": "500", "mode": "vector"}, headers=headers)


def _ask(client: Client, document: Document) -> Any:
    url = reverse("retrieval:document-ask", args=[document.pk])
    return client.get(url, {"query": "notes", "budget": "500", "mode": "vector"}, HTTP_HX_REQUEST="true")


def _assert_throttled(response: Any) -> None:
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    body = response.content.decode()
    assert 'role="alert"' in body and "Too many requests" in body and "Try again in" in body


def test_after_the_rest_budget_is_spent_the_query_page_and_ask_answer_429(
    owner: Any, document: Document
) -> None:
    rest = _rest(owner)
    assert [rest.get("/v1/api/documents").status_code for _ in range(RATE)] == [200] * RATE
    assert rest.get("/v1/api/documents").status_code == 429
    web = _web(owner)
    page = _query_page(web)
    _assert_throttled(page)
    assert "<form" in page.content.decode(), "the whole page, its form still there to try again"
    fragment = _query_page(web, htmx=True)
    _assert_throttled(fragment)
    assert "<form" not in fragment.content.decode(), "htmx gets the results fragment alone"
    _assert_throttled(_ask(web, document))


def test_queries_on_the_web_pages_count_against_the_rest_api(owner: Any, document: Document) -> None:
    web = _web(owner)
    assert _query_page(web).status_code == 200
    assert _query_page(web, htmx=True).status_code == 200
    assert _ask(web, document).status_code == 200
    _assert_throttled(_ask(web, document))
    refused = _rest(owner).get("/v1/api/documents")
    assert refused.status_code == 429, "the REST API answered while the same user is throttled on the pages"
    assert refused.json()["error"]["code"] == "throttled"


def test_pages_that_only_show_are_not_counted(owner: Any, document: Document) -> None:
    web = _web(owner)
    for _ in range(RATE + 2):
        assert web.get(QUERY).status_code == 200  # the empty form runs no query
        assert web.get(document.get_absolute_url()).status_code == 200
    assert _query_page(web).status_code == 200


def test_another_person_keeps_their_own_budget(owner: Any, document: Document) -> None:
    web = _web(owner)
    for _ in range(RATE):
        _query_page(web)
    _assert_throttled(_query_page(web))
    assert _query_page(_web(UserFactory.create())).status_code == 200
