"""GET /v1/api/nodes/{id}/move-places: the places POST /nodes/{id}/move takes, from the move's own
rule; every one listed is taken (with no position given), every other parent is refused."""

from __future__ import annotations

import pytest

from documents.models import Document, Node
from tests.api.conftest import People
from tests.factories import DocumentFactory
from tests.trees import sec, sec_text, sec_tree, tree_save

pytestmark = pytest.mark.django_db
API = "/v1/api"
GUIDE = sec(
    "Field guide",
    "Volcanoes.",
    "A short guide to volcanoes.",
    sec("Formation", "Where they form.", "Magma reaches the surface.", sec("Hotspots", "Plumes.", "Hawaii.")),
    sec("Eruptions", "How they erupt.", "Shield volcanoes erupt gently.", "Stratovolcanoes explode."),
)


@pytest.fixture
def indexed(people: People) -> Document:
    document = DocumentFactory.create(collection=people.collection, content=sec_text(GUIDE))
    tree_save(document, sec_tree(GUIDE))
    return document


@pytest.mark.slow  # ~4 s: every node moved to every place, each undone
def test_every_place_listed_is_taken_and_every_other_parent_refused(
    people: People, indexed: Document
) -> None:
    client = people.client(people.member)
    internal = set(Node.objects.filter(document=indexed).exclude(kind="leaf").values_list("pk", flat=True))
    taken = refused = 0
    for node in Node.objects.filter(document=indexed).exclude(parent=None).order_by("order"):
        answer = client.get(f"{API}/nodes/{node.pk}/move-places")
        assert answer.status_code == 200, answer.json()
        body = answer.json()
        assert (
            body["node"] == node.pk
            and body["tree_version"] == Document.objects.get(pk=indexed.pk).tree_version
        )
        listed = {place["parent"] for place in body["places"]}
        for place in body["places"]:
            moved = client.post(f"{API}/nodes/{node.pk}/move", {"parent": place["parent"]}, format="json")
            assert moved.status_code == 200, moved.json()
            assert Node.objects.get(pk=node.pk).ordinal == place["position"]
            assert client.post(f"{API}/documents/{indexed.pk}/undo", {}, format="json").status_code == 200
            taken += 1
        for parent in sorted(internal - listed - {node.parent_id})[:2]:  # (the rule itself: test_tree_edits)
            moved = client.post(f"{API}/nodes/{node.pk}/move", {"parent": parent}, format="json")
            assert moved.status_code == 400, (node.pk, parent, moved.json())
            refused += 1
    assert taken and refused

    root = Node.objects.get(document=indexed, parent=None)
    assert client.get(f"{API}/nodes/{root.pk}/move-places").json()["places"] == []
    stranger = people.client(people.stranger).get(f"{API}/nodes/{root.pk}/move-places")
    assert stranger.status_code == 404 and stranger.json()["error"]["code"] == "not_found"
