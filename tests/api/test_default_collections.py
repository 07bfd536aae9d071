"""A person's default collection is theirs: another user cannot squat it by guessing its slug.

Before, the default collection of user N was "whatever collection has the slug default-N": Bob
made that slug first and received every upload Alice made without naming a collection.
"""

from __future__ import annotations

import pytest

from documents.models import Collection, Document
from documents.services.collections import collection_create, collection_default
from documents.services.documents import document_create
from openfable.errors import UserInputError
from tests.api.conftest import People
from tests.factories import CollectionFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_a_squatted_default_slug_never_receives_the_victims_uploads(people: People) -> None:
    alice, bob = people.owner, people.stranger
    # Squatting as it was done: the slug the default used to have, and the ownerless one. Made
    # directly in the table, as a collection made before slugs were reserved would be.
    CollectionFactory.create(slug=f"default-{alice.pk}", owner=bob)
    CollectionFactory.create(slug="default", owner=bob)

    answer = people.client(alice).post("/v1/api/documents", {"text": "Alice's private notes."}, format="json")
    assert answer.status_code == 202, answer.content
    document = Document.objects.get(pk=answer.json()["document"]["id"])
    assert document.collection.owner == alice and document.collection.is_default
    assert document.collection.slug == f"default-{alice.pk}-2"

    assert people.client(bob).get(f"/v1/api/documents/{document.pk}").status_code == 404
    assert people.client(alice).get(f"/v1/api/documents/{document.pk}").status_code == 200
    listed = people.client(bob).get("/v1/api/documents").json()
    assert document.pk not in [entry["id"] for entry in listed["results"]]


def test_default_slugs_are_reserved_on_every_write_path(people: People) -> None:
    bob = people.client(people.stranger)
    for slug in ("default", f"default-{people.owner.pk}", "default-7-2"):
        answer = bob.post("/v1/api/collections", {"name": "Mine", "slug": slug}, format="json")
        assert answer.status_code == 400, (slug, answer.content)
        assert "kept for default collections" in answer.json()["error"]["message"]
        with pytest.raises(UserInputError, match="kept for default collections"):
            collection_create(name="Mine", slug=slug, owner=people.stranger)
    # A slug that only starts like one is a name like any other.
    assert bob.post("/v1/api/collections", {"name": "Default settings"}, format="json").status_code == 201
    assert not Collection.objects.filter(is_default=True).exists()


def test_each_person_has_one_default_and_superusers_share_the_ownerless_one() -> None:
    alice, root, other_root = (
        UserFactory.create(),
        UserFactory.create(is_superuser=True),
        UserFactory.create(is_superuser=True),
    )
    mine = collection_default(user=alice)
    assert collection_default(user=alice) == mine and mine.owner == alice
    shared = collection_default(user=root)
    assert shared.owner is None and shared.slug == "default"
    assert collection_default(user=other_root) == shared == collection_default(user=None)
    created = document_create(collection=None, content="From the command line.", queue=False)
    assert created.document.collection == shared
