"""POST /v1/api/query's options for programs: ``top_k`` instead of a budget, ``order``, and the
documents of the answer with what a citation needs, each once."""

from __future__ import annotations

import pytest

from documents.models import Document
from tests.api.conftest import People

pytestmark = pytest.mark.django_db

QUERY = "/v1/api/query"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"token_budget": 500, "top_k": 3}, "Send token_budget or top_k, not both"),
        ({"top_k": 0}, "top_k must be a whole number of passages between 1 and 100"),
        ({"top_k": 101}, "between 1 and 100"),
        ({"top_k": "3"}, "A valid integer is required"),
        ({"order": "best"}, '"best" is not a valid choice'),
    ],
)
def test_wrong_limits_and_orders_are_400_in_words(
    people: People, body: dict[str, object], words: str
) -> None:
    response = people.client(people.owner).post(QUERY, {"query": "volcanoes", **body}, format="json")
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert words in error["message"] + str(error["details"])


def test_top_k_by_score_with_each_document_once(people: People, indexed: Document) -> None:
    indexed.tags, indexed.metadata = ["geo"], {"source": "field notes"}
    indexed.save(update_fields=["tags", "metadata"])
    body = (
        people.client(people.member)
        .post(QUERY, {"query": "How do volcanoes erupt?", "top_k": 2, "order": "score"}, format="json")
        .json()
    )
    assert len(body["chunks"]) == 2 and body["result"]["top_k"] == 2 and body["result"]["order"] == "score"
    assert body["chunks"][0]["score"] >= body["chunks"][1]["score"]
    (document,) = body["documents"]
    assert document == {
        "document_id": indexed.pk,
        "title": "Guide",
        "score": document["score"],
        "token_count": indexed.token_count,
        "source_filename": "",
        "format": "text",
        "tags": ["geo"],
        "metadata": {"source": "field notes"},
        "original": f"/v1/api/documents/{indexed.pk}/original",
    }


def test_an_edit_of_tags_or_metadata_shows_in_the_next_answer(people: People, indexed: Document) -> None:
    client = people.client(people.owner)
    ask = {"query": "How do volcanoes erupt?", "top_k": 1}
    assert client.post(QUERY, ask, format="json").json()["documents"][0]["tags"] == []
    edited = client.patch(
        f"/v1/api/documents/{indexed.pk}", {"tags": ["geo"], "metadata": {"shelf": 3}}, format="json"
    )
    assert edited.status_code == 200
    (document,) = client.post(QUERY, ask, format="json").json()["documents"]
    assert document["tags"] == ["geo"] and document["metadata"] == {"shelf": 3}
