"""Deleting a person on every path keeps their collections and documents, as the operator's.

Before, the account's deletion set its collections ownerless as they were, and its default
collection beside the ownerless one failed ``collection_one_default_per_owner`` (a 500)."""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from documents.models import Collection, Document
from documents.selectors import collections_visible
from documents.services.collections import collection_default
from documents.services.users import user_delete
from tests.factories import CollectionFactory, DocumentFactory, UserFactory

pytestmark = pytest.mark.django_db

KEPT = "Kept alice's 2 collections and their 3 documents: they are now the operator's"


def _alice_with_documents() -> tuple[Any, list[Document]]:
    """alice, her default collection (2 documents) and one more (1), beside the ownerless default."""
    collection_default(user=None)
    alice = UserFactory.create(username="alice")
    default = collection_default(user=alice)
    other = CollectionFactory.create(owner=alice, name="Contracts")
    documents = [
        DocumentFactory.create(collection=default),
        DocumentFactory.create(collection=default),
        DocumentFactory.create(collection=other),
    ]
    return alice, documents


def _assert_kept_as_the_operators(documents: list[Document]) -> None:
    for document in documents:
        document.refresh_from_db()
        assert document.collection.owner_id is None and not document.collection.is_default
    assert Document.objects.count() == len(documents)
    # The one ownerless default is still the one the superusers and the command line use.
    assert Collection.objects.filter(is_default=True, owner=None).count() == 1
    assert collection_default(user=None).slug == "default"


def test_user_delete_directly_beside_the_ownerless_default() -> None:
    alice, documents = _alice_with_documents()
    alice.delete()
    _assert_kept_as_the_operators(documents)
    assert documents[0].collection.name == "alice's documents"


def test_two_people_with_defaults_deleted_one_after_the_other_and_at_once() -> None:
    users = [UserFactory.create() for _ in range(4)]
    documents = [DocumentFactory.create(collection=collection_default(user=user)) for user in users]
    users[0].delete()
    users[1].delete()
    get_user_model().objects.filter(pk__in=[users[2].pk, users[3].pk]).delete()
    for document in documents:
        document.refresh_from_db()
        assert document.collection.owner_id is None and not document.collection.is_default
    assert not Collection.objects.filter(is_default=True).exists()


def test_the_service_says_what_it_kept_and_renames_a_name_the_operator_uses() -> None:
    alice, documents = _alice_with_documents()
    CollectionFactory.create(name="Contracts")  # the operator's own
    deletion = user_delete(user=alice)
    _assert_kept_as_the_operators(documents)
    assert documents[2].collection.name == "Contracts (alice)"
    assert deletion.outcome.startswith(KEPT)
    assert "“Contracts” is renamed “Contracts (alice)”" in deletion.outcome
    assert "The default collection “alice's documents” becomes an ordinary collection." in deletion.outcome


def test_members_keep_their_access() -> None:
    alice, documents = _alice_with_documents()
    bob = UserFactory.create(username="bob")
    documents[2].collection.members.add(bob)
    alice.delete()
    assert list(collections_visible(user=bob)) == [documents[2].collection]


def test_the_admin_deletes_one_person_saying_where_their_collections_go(admin_client: Client) -> None:
    alice, documents = _alice_with_documents()
    url = reverse("admin:auth_user_delete", args=[alice.pk])
    confirmation = admin_client.get(url)
    assert confirmation.status_code == 200
    assert "alice's 2 collections and their 3 documents are kept, not deleted" in unescape(
        confirmation.content.decode()
    )
    response = admin_client.post(url, {"post": "yes"})
    assert response.status_code == 302
    assert not get_user_model().objects.filter(username="alice").exists()
    _assert_kept_as_the_operators(documents)
    assert any(str(message).startswith(KEPT) for message in get_messages(response.wsgi_request))


def test_the_admin_bulk_action_deletes_people_saying_where_their_collections_go(
    admin_client: Client,
) -> None:
    alice, documents = _alice_with_documents()
    bob = UserFactory.create(username="bob")
    documents.append(DocumentFactory.create(collection=collection_default(user=bob)))
    url = reverse("admin:auth_user_changelist")
    selected = {"action": "delete_selected", "_selected_action": [alice.pk, bob.pk]}
    confirmation = admin_client.post(url, selected)
    assert confirmation.status_code == 200
    body = unescape(confirmation.content.decode())
    assert "alice's 2 collections and their 3 documents are kept, not deleted" in body
    assert "bob's 1 collection and their 1 document are kept, not deleted" in body
    response = admin_client.post(url, {**selected, "post": "yes"})
    assert response.status_code == 302
    assert not get_user_model().objects.filter(username__in=["alice", "bob"]).exists()
    _assert_kept_as_the_operators(documents)
    said = [str(message) for message in get_messages(response.wsgi_request)]
    assert any(message.startswith(KEPT) for message in said)
    assert any(message.startswith("Kept bob's 1 collection and their 1 document") for message in said)


def test_manage_py_shell_deleting_a_person() -> None:
    _, documents = _alice_with_documents()
    call_command(
        "shell",
        "--no-imports",
        command="from django.contrib.auth.models import User; User.objects.get(username='alice').delete()",
    )
    _assert_kept_as_the_operators(documents)


def test_the_admin_hands_a_default_collection_to_the_operator(admin_client: Client) -> None:
    alice, documents = _alice_with_documents()
    default = documents[0].collection
    response = admin_client.post(
        reverse("admin:documents_collection_change", args=[default.pk]),
        {"name": default.name, "owner": "", "members": []},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    default.refresh_from_db()
    assert default.owner_id is None and not default.is_default
    # alice gets a new, empty default collection on her next upload.
    assert collection_default(user=alice).pk != default.pk
