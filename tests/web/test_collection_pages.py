"""Collections made, renamed, shared and deleted (after a confirm) by their owner, in the browser's pages."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from documents.models import Collection
from tests.factories import CollectionFactory, DocumentFactory, UserFactory

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_make_rename_share_and_delete_a_collection() -> None:
    owner, friend = UserFactory.create(), UserFactory.create()
    client = _client(owner)
    assert "No collections yet" in client.get(reverse("documents:collections")).content.decode()
    made = client.post(reverse("documents:collections"), {"name": "Contracts 2026"})
    assert made.status_code == 302
    collection = Collection.objects.get(slug="contracts-2026")
    assert collection.owner == owner
    page = reverse("documents:collection", args=["contracts-2026"])
    saved = client.post(page, {"name": "Contracts", "members": friend.username})
    assert saved.status_code == 302
    collection.refresh_from_db()
    assert collection.name == "Contracts" and list(collection.members.all()) == [], (
        "invited, not a member yet"
    )
    assert "Invited, not accepted yet: " + friend.username in client.get(page).content.decode()
    friend_client = _client(friend)
    assert (
        "1 collection shared with you is waiting"
        in friend_client.get(reverse("documents:home")).content.decode()
    )
    offered = friend_client.get(reverse("documents:collections")).content.decode()
    assert "waiting for your answer" in offered and "Contracts" in offered
    invitation = collection.invitations.get()
    accepted = friend_client.post(reverse("documents:invitation", args=[invitation.pk]), {"accept": "1"})
    assert accepted.status_code == 302 and list(collection.members.all()) == [friend]
    assert (
        "waiting for your answer" not in friend_client.get(reverse("documents:collections")).content.decode()
    )
    DocumentFactory.create(collection=collection)

    unconfirmed = client.post(page, {"delete": "wrong"})
    assert unconfirmed.status_code == 400 and "Type the slug" in unconfirmed.content.decode()
    assert Collection.objects.filter(pk=collection.pk).exists()
    assert client.post(page, {"delete": "contracts-2026"}).status_code == 302
    assert not Collection.objects.filter(pk=collection.pk).exists()


def test_members_and_strangers_cannot_manage_it() -> None:
    owner, member, stranger = UserFactory.create(), UserFactory.create(), UserFactory.create()
    collection = CollectionFactory.create(owner=owner, slug="private")
    collection.members.add(member)
    page = reverse("documents:collection", args=["private"])
    refused = _client(member).post(page, {"delete": "private"})
    assert (
        refused.status_code == 403
        and "Only the collection&#x27;s owner can rename" in refused.content.decode()
    )
    assert _client(stranger).get(page).status_code == 404
    assert _client(stranger).post(page, {"name": "Mine now"}).status_code == 404
    collection.refresh_from_db()
    assert collection.name != "Mine now" and Collection.objects.filter(pk=collection.pk).exists()


def test_bad_names_and_taken_slugs_are_refused_in_words() -> None:
    CollectionFactory.create(slug="taken")
    client = _client(UserFactory.create())
    taken = client.post(reverse("documents:collections"), {"name": "Taken"})
    assert taken.status_code == 400 and "already exists" in taken.content.decode()
    digits = client.post(reverse("documents:collections"), {"name": "x", "slug": "123"})
    assert digits.status_code == 400 and "all digits" in digits.content.decode()


def test_tokens_are_made_shown_once_and_revoked_in_the_ui() -> None:
    from openfable.api_tokens import token_user
    from openfable.models import ApiToken

    person = UserFactory.create()
    client = _client(person)
    assert "No tokens yet" in client.get(reverse("tokens")).content.decode()
    made = client.post(reverse("tokens"), {"name": "scripts"}).content.decode()
    key = made.split('<code id="new-key">', 1)[1].split("<", 1)[0]
    assert key.startswith("of_") and token_user(key) is not None
    assert key not in client.get(reverse("tokens")).content.decode(), "shown once"
    token = ApiToken.objects.get(name="scripts")
    other = _client(UserFactory.create())
    assert other.post(reverse("token-revoke", args=[token.pk])).status_code == 404
    assert client.post(reverse("token-revoke", args=[token.pk])).status_code == 302
    assert token_user(key) is None
    empty = client.post(reverse("tokens"), {"name": " "})
    assert empty.status_code == 400 and "needs a name" in empty.content.decode()
