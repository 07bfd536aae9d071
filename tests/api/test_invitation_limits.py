"""Sharing cannot list account names, nor spam people (issue 33 item 6): a name with no account is
invited like any other and answered alike; one person sends at most OPENFABLE_INVITATIONS_PER_DAY
invitations in 24 hours (429, Retry-After); a declined invitation cannot be sent again for
OPENFABLE_INVITATION_DECLINED_DAYS (409). REST API, the collection page and the service, on the
real database."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import caches
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from documents.models import CollectionInvitation
from tests.factories import CollectionFactory, UserFactory

pytestmark = pytest.mark.django_db
API = "/v1/api"


@pytest.fixture(autouse=True)
def fresh_counts() -> Iterator[None]:
    caches["rate_limit"].clear()
    yield
    caches["rate_limit"].clear()


def _api(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _share(client: APIClient, slug: str, names: list[str]) -> Any:
    return client.patch(f"{API}/collections/{slug}", {"members": names}, format="json")


def test_a_real_name_and_a_made_up_one_are_answered_alike() -> None:
    owner, real = UserFactory.create(), UserFactory.create(username="ana")
    CollectionFactory.create(owner=owner, slug="one")
    CollectionFactory.create(owner=owner, slug="two")
    api = _api(owner)
    to_real, to_nobody = _share(api, "one", ["ana"]), _share(api, "two", ["ana-not-here"])
    assert (to_real.status_code, to_nobody.status_code) == (200, 200)
    shape = {
        key: value for key, value in to_real.json().items() if key not in {"id", "slug", "name", "created"}
    }
    other = {
        key: value for key, value in to_nobody.json().items() if key not in {"id", "slug", "name", "created"}
    }
    assert shape == {**other, "invited": ["ana"]} and other["invited"] == ["ana-not-here"]
    # Read back later, the same: both are pending invitations.
    assert _api(owner).get(f"{API}/collections/two").json()["invited"] == ["ana-not-here"]
    assert [item["collection"] for item in _api(real).get(f"{API}/invitations").json()] == ["one"]


def test_an_account_made_later_under_the_name_finds_its_invitation() -> None:
    owner = UserFactory.create()
    CollectionFactory.create(owner=owner, slug="tides")
    assert _share(_api(owner), "tides", ["late-comer"]).status_code == 200
    newcomer = UserFactory.create(username="late-comer")
    (offer,) = _api(newcomer).get(f"{API}/invitations").json()
    accepted = _api(newcomer).post(f"{API}/invitations/{offer['id']}")
    assert accepted.status_code == 200 and accepted.json()["members"] == ["late-comer"]


def test_one_person_sends_at_most_the_days_invitations(settings: Settings) -> None:
    settings.INVITATIONS_PER_DAY = 3
    owner = UserFactory.create()
    CollectionFactory.create(owner=owner, slug="a")
    CollectionFactory.create(owner=owner, slug="b")
    api = _api(owner)
    assert _share(api, "a", ["p1", "p2"]).status_code == 200
    assert _share(api, "a", ["p1", "p2"]).status_code == 200, "a pending invitation is not sent again"
    refused = _share(api, "b", ["p3", "p4"])
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    error = refused.json()["error"]
    assert error["code"] == "too_many_invitations" and "at most 3 invitations a day" in error["message"]
    assert _api(owner).get(f"{API}/collections/b").json()["invited"] == [], (
        "none of the refused list was sent"
    )
    # Withdrawing and sending again does not give the day's invitations back.
    assert _share(api, "a", []).status_code == 200
    assert _share(api, "b", ["p3"]).status_code == 200
    assert _share(api, "b", ["p3", "p1"]).status_code == 429
    assert _share(_api(UserFactory.create()), "b", ["x"]).status_code == 404, "another person: not theirs"


def test_a_declined_invitation_cannot_be_sent_again_for_a_while(settings: Settings) -> None:
    settings.INVITATION_DECLINED_DAYS = 30
    owner, person = UserFactory.create(), UserFactory.create(username="bo")
    CollectionFactory.create(owner=owner, slug="tides")
    api = _api(owner)
    assert _share(api, "tides", ["bo"]).status_code == 200
    (offer,) = _api(person).get(f"{API}/invitations").json()
    assert _api(person).delete(f"{API}/invitations/{offer['id']}").status_code == 204
    assert _api(person).get(f"{API}/invitations").json() == []
    assert api.get(f"{API}/collections/tides").json()["invited"] == []
    again = _share(api, "tides", ["bo"])
    assert again.status_code == 409 and again.json()["error"]["code"] == "invitation_declined"
    assert "invite them again from" in again.json()["error"]["message"]
    # Leaving the name out does not reset the cool-down; after it, the name is offered anew.
    assert _share(api, "tides", []).status_code == 200
    assert _share(api, "tides", ["bo"]).status_code == 409
    CollectionInvitation.objects.filter(username="bo").update(declined=timezone.now() - timedelta(days=31))
    assert _share(api, "tides", ["bo"]).json()["invited"] == ["bo"]
    assert len(_api(person).get(f"{API}/invitations").json()) == 1


def test_the_collection_page_answers_a_made_up_name_as_a_real_one() -> None:
    owner = UserFactory.create()
    UserFactory.create(username="real-one")
    collection = CollectionFactory.create(owner=owner, slug="page")
    client = Client()
    client.force_login(owner)
    url = f"/collections/{collection.slug}/"
    answers = [
        client.post(url, {"name": collection.name, "members": name}) for name in ("real-one", "made-up-one")
    ]
    assert [answer.status_code for answer in answers] == [302, 302]
    assert "made-up-one" in client.get(url).content.decode()
