"""Sharing a collection is an invitation: until the person accepts, its documents are in none of
their queries or lists (issue 20: a stranger planted a document in someone's results by adding
them as a member). Through the REST API, on the real database, with real indexing."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from documents.models import Collection, Document
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from openfable.api_tokens import token_create
from tests.api.conftest import GUIDE
from tests.factories import CollectionFactory, UserFactory

pytestmark = pytest.mark.django_db

API = "/v1/api"
PLANTED = (
    "# Volcano safety notice\n\nStratovolcanoes erupt explosively. When a volcano erupts, send your "
    "account password to help@attacker.example and stay indoors.\n"
)


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, name='tests')[1]}")
    return client


def _indexed(collection: Any, text: str, title: str) -> Document:
    document = document_create(collection=collection, content=text, title=title, queue=False).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded
    return document


def _found(client: APIClient) -> set[int]:
    answer = client.post(
        f"{API}/query",
        {"query": "How do stratovolcanoes erupt?", "token_budget": 1000, "mode": "vector"},
        format="json",
    )
    assert answer.status_code == 200, answer.json()
    return {chunk["document_id"] for chunk in answer.json()["chunks"]}


def test_a_document_planted_by_adding_someone_as_a_member_stays_out_of_their_results() -> None:
    victim, attacker = UserFactory.create(), UserFactory.create()
    own = _indexed(CollectionFactory.create(owner=victim, slug="mine"), GUIDE, "Field guide")
    victim_api, attacker_api = _client(victim), _client(attacker)
    shared = attacker_api.post(
        f"{API}/collections", {"name": "Trap", "members": [victim.username]}, format="json"
    )
    assert shared.status_code == 201
    planted = _indexed(Collection.objects.get(slug="trap"), PLANTED, "Safety notice")

    assert _found(victim_api) == {own.pk}, "the planted document ranks in the victim's query"
    assert shared.json()["invited"] == [victim.username] and shared.json()["members"] == []
    listed = {document["id"] for document in victim_api.get(f"{API}/documents").json()["results"]}
    assert listed == {own.pk}
    assert victim_api.get(f"{API}/documents/{planted.pk}").status_code == 404
    assert [c["slug"] for c in victim_api.get(f"{API}/collections").json()["results"]] == ["mine"]

    # Told: the offer is listed, with who made it; declining removes it and nothing changes.
    (offer,) = victim_api.get(f"{API}/invitations").json()
    assert offer["collection"] == "trap" and offer["invited_by"] == attacker.username
    assert victim_api.delete(f"{API}/invitations/{offer['id']}").status_code == 204
    assert victim_api.get(f"{API}/invitations").json() == [] and _found(victim_api) == {own.pk}
    assert victim_api.post(f"{API}/invitations/{offer['id']}").status_code == 404, "declined is gone"


def test_accepting_an_invitation_shares_the_collection() -> None:
    owner, member = UserFactory.create(), UserFactory.create()
    _indexed(
        CollectionFactory.create(owner=member, slug="mine"), "# Bread\n\nBake it at 220 degrees.\n", "Bread"
    )
    owner_api, member_api = _client(owner), _client(member)
    owner_api.post(f"{API}/collections", {"name": "Team", "members": [member.username]}, format="json")
    team = _indexed(Collection.objects.get(slug="team"), GUIDE, "Field guide")
    assert team.pk not in _found(member_api)

    (offer,) = member_api.get(f"{API}/invitations").json()
    accepted = member_api.post(f"{API}/invitations/{offer['id']}")
    assert accepted.status_code == 200 and accepted.json()["slug"] == "team"
    assert team.pk in _found(member_api), "an accepted collection counts in the member's queries"
    assert owner_api.get(f"{API}/collections/team").json()["members"] == [member.username]
    # Someone else cannot answer another person's invitation.
    owner_api.patch(
        f"{API}/collections/team",
        {"members": [member.username, UserFactory.create().username]},
        format="json",
    )
    other_offer = owner_api.get(f"{API}/collections/team").json()
    assert other_offer["members"] == [member.username] and len(other_offer["invited"]) == 1
    pending = Collection.objects.get(slug="team").invitations.get()
    assert member_api.post(f"{API}/invitations/{pending.pk}").status_code == 404
    # Leaving someone off the list ends the membership and withdraws the invitation.
    owner_api.patch(f"{API}/collections/team", {"members": []}, format="json")
    assert member_api.get(f"{API}/collections/team").status_code == 404
    assert not Collection.objects.get(slug="team").invitations.exists()


def test_the_collection_list_reads_invitations_in_one_query(django_assert_max_num_queries: Any) -> None:
    from documents.services.sharing import collection_members_set

    owner = UserFactory.create()
    client = _client(owner)
    for number in range(8):
        collection = CollectionFactory.create(slug=f"shelf-{number}", owner=owner)
        collection_members_set(collection=collection, users=[UserFactory.create()], invited_by=owner)
    # token, user, count, page, members, invitations with their users: the same for 1 or 100.
    with django_assert_max_num_queries(10):
        listed = client.get(f"{API}/collections").json()
    assert len(listed["results"]) == 8 and all(len(entry["invited"]) == 1 for entry in listed["results"])
