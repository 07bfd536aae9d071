"""Collections with members, the health check, and the OpenAPI documents served offline."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from documents.models import Collection
from tests.api.conftest import People

pytestmark = pytest.mark.django_db

API = "/v1/api"


def test_collections_are_made_shared_renamed_and_deleted_by_their_owner(people: People) -> None:
    owner = people.client(people.owner)
    made = owner.post(
        f"{API}/collections", {"name": "Tides", "members": [people.member.username]}, format="json"
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["slug"] == "tides" and body["owner"] == people.owner.username
    assert body["members"] == [] and body["invited"] == [people.member.username]
    member = people.client(people.member)
    assert member.get(f"{API}/collections/tides").status_code == 404, "not shared until accepted"
    (invitation,) = member.get(f"{API}/invitations").json()
    assert invitation["collection"] == "tides" and invitation["invited_by"] == people.owner.username
    accepted = member.post(f"{API}/invitations/{invitation['id']}")
    assert accepted.status_code == 200 and accepted.json()["members"] == [people.member.username]
    assert member.get(f"{API}/collections/tides").status_code == 200
    refused = member.delete(f"{API}/collections/tides")
    assert refused.status_code == 403 and "Only the collection's owner" in refused.json()["error"]["message"]
    assert people.client(people.stranger).get(f"{API}/collections/tides").status_code == 404
    renamed = owner.patch(f"{API}/collections/tides", {"name": "Tide tables", "members": []}, format="json")
    assert (
        renamed.status_code == 200
        and renamed.json()["name"] == "Tide tables"
        and renamed.json()["members"] == []
    )
    assert member.get(f"{API}/collections/tides").status_code == 404, "no longer shared"
    # A name without an account is invited like any other: the answer does not say which exist.
    unknown = owner.patch(f"{API}/collections/tides", {"members": ["nobody-here"]}, format="json")
    assert unknown.status_code == 200 and unknown.json()["invited"] == ["nobody-here"]
    assert owner.delete(f"{API}/collections/tides").status_code == 204
    assert not Collection.objects.filter(slug="tides").exists()


def test_health_needs_no_token_and_names_what_failed() -> None:
    response = APIClient().get(f"{API}/health")
    body = response.json()
    assert set(body["checks"]) == {"database", "pgvector", "broker", "worker", "embeddings", "llm"}
    assert (
        body["checks"]["database"]["ok"]
        and body["checks"]["pgvector"]["ok"]
        and body["checks"]["embeddings"]["ok"]
    )
    # No worker runs beside the tests: the answer is 503 and says so.
    assert response.status_code == 503 and body["status"] == "unavailable" and "worker" in body["failed"]


def test_the_schema_and_its_reader_need_a_sign_in_and_are_served_offline(people: People) -> None:
    # As every page and endpoint but health: the schema and /docs are for people signed in.
    anonymous = APIClient()
    assert anonymous.get(f"{API}/schema/").status_code == 401
    refused = anonymous.get(f"{API}/schema/", {"format": "json"})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "not_authenticated"
    to_sign_in = anonymous.get("/docs")
    assert to_sign_in.status_code == 302 and to_sign_in["Location"] == "/accounts/login/?next=/docs"
    # A token reads the schema (schemathesis, code generators); a browser session reads both.
    schema = people.client(people.owner).get(f"{API}/schema/")
    assert schema.status_code == 200 and b"/v1/api/documents" in schema.content
    browser = APIClient()
    browser.force_login(people.owner)
    assert browser.get(f"{API}/schema/").status_code == 200
    swagger = browser.get("/docs")
    assert swagger.status_code == 200 and b"swagger-ui" in swagger.content
    page = swagger.content.decode()
    # Every script, style and icon from this machine; no validator badge asking validator.swagger.io.
    assert re.findall(r'(?:src|href)="(?!/static/)', page) == [], "only /static/ assets"
    assert '"validatorUrl": null' in page
    # ReDoc is gone (its bundle always loads a logo from cdn.redoc.ly): /redoc leads to /docs.
    redoc = browser.get("/redoc")
    assert redoc.status_code == 302 and redoc["Location"] == "/docs"


def test_tokens_are_made_and_revoked_in_the_admin(admin_client: object, people: People) -> None:
    from django.test import Client

    from openfable.api_tokens import token_user
    from openfable.models import ApiToken

    assert isinstance(admin_client, Client)
    response = admin_client.post(
        "/admin/openfable/apitoken/add/", {"user": people.stranger.pk, "name": "ci"}, follow=True
    )
    body = response.content.decode()
    token = ApiToken.objects.get(name="ci")
    key = body.split("is ", 1)[1].split(" ", 1)[0]
    assert key.startswith("of_") and token.key_hash != key and key not in token.key_hash
    assert token_user(key) is not None and token_user(key)[0] == people.stranger  # type: ignore[index]
    admin_client.post(
        "/admin/openfable/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}, follow=True
    )
    assert token_user(key) is None


def test_a_user_can_be_given_a_rate_of_their_own(people: People, settings: object) -> None:
    from django.core.cache import caches

    cache = caches["rate_limit"]  # openfable.rate_limit counts there
    cache.clear()
    settings.API_THROTTLE_RATES = {people.stranger.username: "2/minute"}  # type: ignore[attr-defined]
    slow, other = people.client(people.stranger), people.client(people.owner)
    assert [slow.get(f"{API}/documents").status_code for _ in range(3)] == [200, 200, 429]
    throttled = slow.get(f"{API}/documents")
    assert throttled.json()["error"]["code"] == "throttled" and "Retry-After" in throttled
    assert other.get(f"{API}/documents").status_code == 200, "the others keep the common rate"
    cache.clear()
