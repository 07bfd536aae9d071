"""The query page: budgeted results highlighted in place, in document order, settings remembered."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from documents.ingestion.heading_titles import without_heading_marks
from documents.models import Document
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from tests.factories import CollectionFactory, UserFactory
from tests.fakes.llm.server import ScriptedOpenAIServer, status

pytestmark = pytest.mark.django_db
QUERY = reverse("retrieval:query")
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
    document = document_create(
        collection=CollectionFactory.create(owner=owner, slug="volcanoes"),
        content=GUIDE,
        title="Guide",
        queue=False,
    ).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded
    return document


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_empty_page_says_what_to_do(owner: Any) -> None:
    body = _client(owner).get(QUERY).content.decode()
    assert "Ask a question" in body and 'name="budget"' in body and 'type="range"' in body


def test_results_are_highlighted_in_place_within_the_budget(owner: Any, guide: Document) -> None:
    response = _client(owner).get(
        QUERY, {"query": "How do stratovolcanoes erupt?", "budget": "100", "mode": "vector"}
    )
    assert response.status_code == 200
    result = response.context["result"]
    assert 0 < result.total_tokens <= 100
    starts = [chunk.start_char for chunk in result.chunks]
    assert starts == sorted(starts), "document order"
    body = response.content.decode()
    for chunk in result.chunks:
        # The passage as a person reads it: its heading lines without their "## " marks.
        assert f"<mark>{without_heading_marks(chunk.text)}" in body.replace("&#x27;", "'")
        assert f"?node={chunk.node_id}" in body
    assert "# Field guide" in "".join(chunk.text for chunk in result.chunks)
    assert not re.search(r"(?m)^#+ ", body.split("<main", 1)[1])
    assert "Copy context" in body and "Paths and timings" in body
    # The paths in words, with counts that agree with their nouns.
    assert "found by vector search and keyword search" in body
    assert "Vector search: ran (1 candidate)" in body and not re.search(r"\b1 candidates\b", body)


def test_htmx_gets_the_results_fragment_and_settings_are_remembered(owner: Any, guide: Document) -> None:
    client = _client(owner)
    fragment = client.get(
        QUERY, {"query": "magma", "budget": "300", "collection": "volcanoes"}, HTTP_HX_REQUEST="true"
    )
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
    page = client.get(QUERY).content.decode()
    assert 'value="magma"' in page and 'value="300"' in page and "Recent queries" in page


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"query": "magma", "budget": "99"}, "outside the accepted range"),
        ({"query": "magma", "budget": "lots"}, "must be a whole number"),
        ({"query": "   ", "budget": "500"}, "The query is empty"),
        ({"query": "magma", "budget": "500", "collection": "someone-elses"}, "There is no collection"),
    ],
)
def test_bad_input_is_shown_in_the_engines_words(
    owner: Any, guide: Document, params: dict[str, str], message: str
) -> None:
    response = _client(owner).get(QUERY, params)
    assert response.status_code == 400 and message in response.content.decode()


def test_a_stranger_never_sees_anothers_chunks(guide: Document) -> None:
    stranger = UserFactory.create()
    response = _client(stranger).get(QUERY, {"query": "volcanoes erupt", "budget": "1000"})
    assert response.status_code == 200 and response.context["result"].chunks == ()
    assert "Volcanoes form" not in response.content.decode()


def test_the_page_needs_a_sign_in(client: Client) -> None:
    response = client.get(QUERY)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_the_query_page_costs_a_bounded_number_of_queries(
    owner: Any, guide: Document, django_assert_max_num_queries: Any
) -> None:
    client = _client(owner)
    with django_assert_max_num_queries(40):
        response = client.get(QUERY, {"query": "How do volcanoes erupt?", "budget": "500", "mode": "vector"})
    assert response.status_code == 200 and response.context["result"].chunks


def test_the_documents_filter_limits_the_query(owner: Any, guide: Document) -> None:
    other = document_create(
        collection=guide.collection, content="Tide tables.\n\nHigh tide comes twice a day.\n", queue=False
    ).document
    assert job_run_now(document_id=other.pk) is not None
    client = _client(owner)
    page = client.get(QUERY).content.decode()
    assert f'type="checkbox" name="documents" value="{other.pk}">' in page
    response = client.get(QUERY, {"query": "erupt", "budget": "2000", "documents": [str(other.pk)]})
    result = response.context["result"]
    assert {chunk.document_id for chunk in result.chunks} == {other.pk}
    assert f'value="{other.pk}" checked' in response.content.decode()


def test_the_page_says_when_the_llm_is_cooling_down(owner: Any, guide: Document, settings: Any) -> None:
    with ScriptedOpenAIServer(chat_default=status(500, "the model crashed")) as server:
        settings.LLM_MODEL = "smollm2"
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_MAX_RETRIES = 2
        settings.LLM_RETRY_BASE_DELAY = 0.01
        client = _client(owner)
        failed = client.get(QUERY, {"query": "How do stratovolcanoes erupt?", "budget": "100"})
        cooling = client.get(QUERY, {"query": "Where do volcanoes form?", "budget": "100"})
        assert len(server.chat_requests) == 3, "the second query did not call the LLM"
    assert "The LLM&#x27;s pick of documents: failed — LLM call failed" in failed.content.decode()
    body = cooling.content.decode()
    assert (
        "The LLM&#x27;s pick of documents: did not run — LLM cooling down after 3 failed request(s) in a row"
        in body
    )
    assert "the next try is in" in body and cooling.context["result"].chunks
