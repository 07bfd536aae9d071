"""The API keeps its word (issue 20, item 17): every answer under /v1/api/ in the one JSON error
shape, pages in a total order, malformed parameters refused in words, and a schema that names
every status and every null the server gives. Real HTTP handling (DRF's test client), real database."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, RequestFactory
from django.utils import timezone
from rest_framework.test import APIClient

from api.serializers import SLUG_PATTERN
from documents.models import Collection, Document
from documents.services.documents import document_create
from openfable.http import server_error
from tests.api.conftest import GUIDE, People
from tests.factories import CollectionFactory, DocumentFactory, UserFactory

pytestmark = pytest.mark.django_db

API = "/v1/api"


def _error(response: Any) -> dict[str, Any]:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    return dict(body["error"])


# -- one error shape -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/documents/abc"),
        ("get", "/nope"),
        ("delete", "/documents/1.5"),
        ("post", "/nodes/abc/split"),
        ("get", "/documents/"),
        ("get", "/schema"),
        # A newline anywhere in the path (schemathesis sends them): still the API's 404.
        ("get", "/documents/abc\n"),
        ("get", "/no\nthing"),
        ("patch", "/nodes/\n/merge"),
        ("get", "/\n"),
    ],
)
def test_a_path_that_names_no_endpoint_answers_404_in_the_json_shape(
    people: People, method: str, path: str
) -> None:
    for client in (people.client(people.owner), APIClient()):
        response = getattr(client, method)(f"{API}{path}")
        assert response.status_code == 404, (method, path, response.content[:200])
        error = _error(response)
        assert error["code"] == "not_found" and "/v1/api/schema/" in error["message"]


def test_a_server_error_under_the_api_answers_500_in_the_json_shape(
    people: People, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr("api.views.documents.selectors.document_list", broken)
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(people.owner)
    response = client.get(f"{API}/documents")
    assert response.status_code == 500
    assert _error(response)["code"] == "server_error"
    assert "a bug" in caplog.text  # logged with its traceback, never shown


def test_an_error_outside_any_view_answers_an_api_path_in_json_and_a_page_elsewhere() -> None:
    factory = RequestFactory()
    api = server_error(factory.get(f"{API}/documents"))
    assert api.status_code == 500 and json.loads(api.content)["error"]["code"] == "server_error"
    page = server_error(factory.get("/collections/"))
    assert page.status_code == 500 and not page["Content-Type"].startswith("application/json")


def test_a_form_body_is_refused_as_415_in_the_json_shape(people: People) -> None:
    response = people.client(people.owner).post(f"{API}/query", {"query": "volcano"}, format="multipart")
    assert response.status_code == 415 and _error(response)["code"] == "unsupported_media_type"


# -- stable pages --------------------------------------------------------------------------------


def test_collections_are_listed_newest_first_then_by_id(people: People) -> None:
    owner = people.client(people.owner)
    for name in ("Zebra notes", "Alpha notes", "Alpha notes"):
        assert owner.post(f"{API}/collections", {"name": name, "slug": ""}).status_code in (201, 409)
    made = list(
        Collection.objects.filter(owner=people.owner).order_by("-created", "-id").values_list("pk", flat=True)
    )
    listed = [item["id"] for item in owner.get(f"{API}/collections").json()["results"]]
    assert listed == made  # not by name: "Alpha" would come first


def test_document_pages_never_shift_when_documents_share_a_moment(people: People) -> None:
    documents = [DocumentFactory.create(collection=people.collection) for _ in range(5)]
    Document.objects.filter(pk__in=[d.pk for d in documents]).update(created=timezone.now())
    owner = people.client(people.owner)
    seen = []
    for offset in range(5):
        page = owner.get(f"{API}/documents", {"limit": 1, "offset": offset}).json()
        seen += [item["id"] for item in page["results"]]
    assert seen == sorted((d.pk for d in documents), reverse=True)


# -- malformed parameters ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ({"status": "AAA"}, "is not one of queued, indexing, indexed, failed"),
        ({"status": ""}, "is not one of"),
        ({"limit": "ten"}, "is not a whole number"),
        ({"limit": ""}, "is not a whole number"),
        ({"limit": "--5"}, "is not a whole number"),
        ({"limit": "0"}, "it takes 1 to 500"),
        ({"limit": "501"}, "it takes 1 to 500"),
        ({"offset": "-1"}, "it takes 0 to"),
        ({"offset": "1e3"}, "is not a whole number"),
        ({"offset": str(10**20)}, "is not a whole number"),
        ({"created_before": ""}, "is not a date"),
    ],
)
def test_malformed_list_parameters_are_refused_in_words(
    people: People, query: dict[str, str], fragment: str
) -> None:
    response = people.client(people.owner).get(f"{API}/documents", query)
    assert response.status_code == 400, response.content
    assert fragment in _error(response)["message"]


def test_malformed_pages_of_collections_and_history_are_refused(people: People) -> None:
    owner = people.client(people.owner)
    document = document_create(collection=people.collection, content=GUIDE, queue=False).document
    for url in (f"{API}/collections", f"{API}/documents/{document.pk}/history"):
        response = owner.get(url, {"limit": "many"})
        assert response.status_code == 400 and "limit" in _error(response)["message"], url


@pytest.mark.parametrize("value", ["maybe", "", "True ", "2"])
def test_a_flag_that_is_not_true_or_false_is_refused(people: People, value: str) -> None:
    owner = people.client(people.owner)
    document = document_create(collection=people.collection, content=GUIDE, queue=False).document
    for url, flag in (
        (f"{API}/documents/{document.pk}", "meta_only"),
        (f"{API}/documents/{document.pk}/tree", "flat"),
    ):
        response = owner.get(url, {flag: value})
        assert response.status_code == 400 and "is not true or false" in _error(response)["message"]
    before = Document.objects.count()
    response = owner.post(f"{API}/documents?wait={value}", {"text": "Another note."})
    assert response.status_code == 400 and "wait" in _error(response)["message"]
    assert Document.objects.count() == before  # refused before anything was stored


@pytest.mark.parametrize("value", ["true", "TRUE", "1", "yes", "false", "0", "no"])
def test_the_flag_spellings_that_are_taken(people: People, value: str) -> None:
    document = document_create(collection=people.collection, content=GUIDE, queue=False).document
    response = people.client(people.owner).get(f"{API}/documents/{document.pk}", {"meta_only": value})
    assert response.status_code == 200
    assert ("content" not in response.json()) == (value.lower() in {"true", "1", "yes"})


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/query", {"query": 5}),
        ("/query", {"query": "volcano", "token_budget": "500"}),
        ("/query", {"query": "volcano", "token_budget": True}),
        ("/query", {"query": "volcano", "documents": ["1"]}),
        ("/documents", {"text": ["a list"]}),
        ("/documents", {"text": "Notes.", "metadata": ["not", "an", "object"]}),
        ("/collections", {"name": 7}),
    ],
)
def test_values_of_another_type_than_the_schema_says_are_refused(
    people: People, url: str, body: dict[str, Any]
) -> None:
    response = people.client(people.owner).post(f"{API}{url}", body)
    assert response.status_code == 400, response.content


def test_a_query_filter_naming_nothing_there_is_a_404_as_in_a_list(people: People) -> None:
    owner = people.client(people.owner)
    for filters in ({"collection": "nowhere"}, {"documents": [987654321]}, {"tags": ["no-such-tag"]}):
        response = owner.post(f"{API}/query", {"query": "volcano", **filters})
        assert response.status_code == 404 and _error(response)["code"] == "not_found", filters


# -- the schema and the server agree -------------------------------------------------------------


def _schema() -> dict[str, Any]:
    reader = Client()
    reader.force_login(UserFactory.create())  # the schema needs a sign-in, as every endpoint but health
    return dict(reader.get(f"{API}/schema/", {"format": "json"}).json())


def test_the_schema_names_every_status_the_server_gives() -> None:
    for path, operations in _schema()["paths"].items():
        for method, operation in operations.items():
            statuses = set(operation["responses"])
            if path == "/v1/api/health":
                assert statuses == {"200", "503"}
                continue
            if path == "/v1/api/health/live":  # the liveness probe: it answers, or nothing does
                assert statuses == {"200"}
                continue
            assert {"400", "401", "404", "429", "503"} <= statuses, (method, path)
            if method in {"post", "patch", "delete"}:
                assert {"403", "409"} <= statuses, (method, path)
            if "requestBody" in operation:
                assert {"413", "415"} <= statuses, (method, path)


def test_an_ownerless_collection_is_answered_with_owner_null_as_the_schema_allows(
    admin_client: Client,
) -> None:
    collection = CollectionFactory.create(owner=None)
    answer = admin_client.get(f"{API}/collections/{collection.slug}")
    assert answer.status_code == 200 and answer.json()["owner"] is None
    owner = _schema()["components"]["schemas"]["Collection"]["properties"]["owner"]
    assert owner["nullable"] is True


def test_slug_0_is_refused_by_schema_and_server_alike_and_a_name_0_gets_a_usable_slug(
    people: People,
) -> None:
    owner = people.client(people.owner)
    refused = owner.post(f"{API}/collections", {"name": "Numbers", "slug": "0"})
    assert refused.status_code == 400 and "all digits" in _error(refused)["message"]
    assert re.search(SLUG_PATTERN, "0") is None
    slug = _schema()["components"]["schemas"]["CollectionCreateRequest"]["properties"]["slug"]
    assert SLUG_PATTERN in json.dumps(slug).replace("\\\\", "\\")
    made = owner.post(f"{API}/collections", {"name": "00042"})
    assert made.status_code == 201 and made.json()["slug"] == "collection-00042"
    assert re.search(SLUG_PATTERN, made.json()["slug"])
    taken = owner.post(f"{API}/collections", {"name": "00042"})
    assert taken.status_code == 409 and "already exists" in _error(taken)["message"]


def test_metadata_null_is_no_metadata_in_schema_and_server(people: People) -> None:
    made = people.client(people.owner).post(f"{API}/documents", {"text": "Notes.", "metadata": None})
    assert made.status_code == 202, made.content
    assert made.json()["document"]["metadata"] == {}
    metadata = _schema()["components"]["schemas"]["DocumentCreateRequest"]["properties"]["metadata"]
    assert metadata == {"type": "object", "additionalProperties": {}, "nullable": True}


def test_a_document_without_its_text_keeps_to_the_schema(people: People) -> None:
    document = document_create(collection=people.collection, content=GUIDE, queue=False).document
    answer = people.client(people.owner).get(f"{API}/documents/{document.pk}", {"meta_only": "true"}).json()
    schema = _schema()["components"]["schemas"]["Document"]
    assert "content" not in answer and set(schema["required"]) <= set(answer)


def test_text_filters_say_in_the_schema_that_nul_is_refused(people: People) -> None:
    parameters = {
        parameter["name"]: parameter["schema"]
        for parameter in _schema()["paths"]["/v1/api/documents"]["get"]["parameters"]
    }
    for name in ("tag", "search", "collection"):
        assert re.search(parameters[name]["pattern"], "a\x00b") is None, name
    refused = people.client(people.owner).get(f"{API}/documents", {"tag": "a\x00b"})
    assert refused.status_code == 400 and "NUL" in _error(refused)["message"]


def test_sharing_with_a_name_without_an_account_answers_as_for_anyone(people: People) -> None:
    # Issue 33: a 404 "unknown_user" told anyone which account names exist.
    answer = people.client(people.owner).post(
        f"{API}/collections", {"name": "Shared", "members": ["nobody-at-all"]}
    )
    assert answer.status_code == 201 and answer.json()["invited"] == ["nobody-at-all"]


def test_an_empty_file_is_refused_in_the_services_words(people: People) -> None:
    empty = SimpleUploadedFile("empty.md", b"", content_type="text/markdown")
    answer = people.client(people.owner).post(f"{API}/documents", {"file": empty}, format="multipart")
    assert answer.status_code == 400 and "The document is empty" in _error(answer)["message"]
