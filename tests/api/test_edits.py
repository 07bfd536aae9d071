"""Tree edits through the REST API: the same services, validation and messages as the UI."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from documents.models import Document, Node, TreeEdit
from tests.api.conftest import People

pytestmark = pytest.mark.django_db
API = "/v1/api"


def _nodes(document: Document, kind: str) -> list[Node]:
    return list(Node.objects.filter(document=document, kind=kind).order_by("order"))


def test_split_merge_move_group_dissolve_undo_and_history(people: People, indexed: Document) -> None:
    client = people.client(people.member)
    version = client.get(f"{API}/documents/{indexed.pk}?meta_only=true").json()["tree_version"]
    leaf = max(_nodes(indexed, "leaf"), key=lambda node: node.end_char - node.start_char)
    middle = (leaf.start_char + leaf.end_char) // 2

    split = client.post(
        f"{API}/nodes/{leaf.pk}/split",
        {"position": middle, "snap": False, "expected_version": version},
        format="json",
    )
    assert split.status_code == 200, split.json()
    body = split.json()
    assert body["node"]["end_char"] == middle and len(body["created"]) == 1 and body["tree_version"] > version

    stale = client.post(f"{API}/nodes/{leaf.pk}/merge", {"expected_version": version}, format="json")
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "conflict"
    merged = client.post(
        f"{API}/nodes/{leaf.pk}/merge", {"expected_version": body["tree_version"]}, format="json"
    )
    assert merged.status_code == 200 and merged.json()["node"]["end_char"] == leaf.end_char

    sections = _nodes(indexed, "section")
    grouped = client.post(
        f"{API}/documents/{indexed.pk}/group",
        {"first": sections[0].pk, "last": sections[-1].pk, "title": "Everything", "summary": "All sections."},
        format="json",
    )
    assert grouped.status_code == 200, grouped.json()
    group = grouped.json()["node"]
    assert group["title"] == "Everything" and group["kind"] == "section"
    dissolved = client.post(f"{API}/nodes/{group['id']}/dissolve", {}, format="json")
    assert dissolved.status_code == 200, dissolved.json()

    history = client.get(f"{API}/documents/{indexed.pk}/history").json()["results"]
    assert [item["operation"] for item in history] == ["dissolve", "group", "merge", "split"]
    assert history[0]["user"] == people.member.username
    for _ in range(4):
        assert client.post(f"{API}/documents/{indexed.pk}/undo", {}, format="json").status_code == 200
    restored = [
        (n.pk, n.kind, n.start_char, n.end_char)
        for n in Node.objects.filter(document=indexed).order_by("order")
    ]
    assert (leaf.pk, "leaf", leaf.start_char, leaf.end_char) in restored


def test_exclude_through_patch_and_a_refused_split(people: People, indexed: Document) -> None:
    client = people.client(people.owner)
    section = _nodes(indexed, "section")[-1]
    excluded = client.patch(f"{API}/nodes/{section.pk}", {"excluded": True}, format="json")
    assert excluded.status_code == 200 and excluded.json()["excluded"] is True
    assert all(
        node.excluded
        for node in Node.objects.filter(
            document=indexed, start_char__gte=section.start_char, end_char__lte=section.end_char
        )
    )
    leaf = _nodes(indexed, "leaf")[0]
    outside = client.post(
        f"{API}/nodes/{leaf.pk}/split", {"position": leaf.end_char + 5, "snap": False}, format="json"
    )
    assert outside.status_code == 400 and outside.json()["error"]["message"]


def test_strangers_cannot_edit(people: People, indexed: Document) -> None:
    stranger = people.client(people.stranger)
    leaf: Any = _nodes(indexed, "leaf")[0]
    for url, payload in [
        (f"{API}/nodes/{leaf.pk}/split", {"position": leaf.start_char + 2}),
        (f"{API}/nodes/{leaf.pk}/merge", {}),
        (f"{API}/documents/{indexed.pk}/undo", {}),
    ]:
        assert stranger.post(url, payload, format="json").status_code == 404, url
    assert stranger.get(f"{API}/documents/{indexed.pk}/history").status_code == 404


def test_a_patch_is_all_or_nothing(people: People, indexed: Document) -> None:
    """A title and an exclusion in one PATCH are one service call in one transaction: a refused
    exclusion leaves the title unwritten. (Two transactions wrote the title, then refused.)"""
    client = people.client(people.owner)
    section = _nodes(indexed, "section")[-1]
    assert client.patch(f"{API}/nodes/{section.pk}", {"excluded": True}, format="json").status_code == 200
    leaf = Node.objects.get(
        document=indexed, kind="leaf", start_char__gte=section.start_char, end_char__lte=section.end_char
    )
    version = client.get(f"{API}/documents/{indexed.pk}?meta_only=true").json()["tree_version"]
    refused = client.patch(
        f"{API}/nodes/{leaf.pk}",
        {"title": "A new title", "excluded": False, "expected_version": version},
        format="json",
    )
    assert refused.status_code == 400, refused.json()
    assert "which is excluded from retrieval" in refused.json()["error"]["message"]
    assert Node.objects.get(pk=leaf.pk).title == leaf.title, "nothing of the refused PATCH was written"
    assert client.get(f"{API}/documents/{indexed.pk}?meta_only=true").json()["tree_version"] == version

    both = client.patch(
        f"{API}/nodes/{section.pk}",
        {"title": "Eruptions, again", "excluded": False, "expected_version": version},
        format="json",
    )
    assert both.status_code == 200 and both.json()["title"] == "Eruptions, again"
    assert both.json()["excluded"] is False
    stale = client.patch(
        f"{API}/nodes/{section.pk}", {"excluded": True, "expected_version": version}, format="json"
    )
    assert stale.status_code == 409, "the version is checked by the service, once"


def test_group_refuses_nodes_of_another_document(people: People, indexed: Document) -> None:
    from documents.services.documents import document_create
    from documents.services.jobs import job_run_now

    other = document_create(
        collection=people.collection, content="# Other\n\n## One\n\nA.\n\n## Two\n\nB.\n", queue=False
    ).document
    assert job_run_now(document_id=other.pk) is not None
    foreign = _nodes(other, "section")
    client = people.client(people.owner)
    refused = client.post(
        f"{API}/documents/{indexed.pk}/group",
        {"first": foreign[0].pk, "last": foreign[-1].pk, "title": "Stolen"},
        format="json",
    )
    assert refused.status_code == 404
    assert f"in document {indexed.pk}" in refused.json()["error"]["message"]
    assert not Node.objects.filter(title="Stolen").exists()


def test_the_history_answers_as_its_schema_says(people: People, indexed: Document) -> None:
    # An edit not undone has no undone_by, and an edit whose user was deleted has no user: both
    # null, as the schema must say (schemathesis's stateful phase found undone_by: null against
    # a schema of type string once its edits succeeded).
    client = people.client(people.owner)
    leaf = _nodes(indexed, "leaf")[0]
    merged = client.post(f"{API}/nodes/{leaf.pk}/merge", {}, format="json")
    assert merged.status_code == 200, merged.json()
    TreeEdit.objects.filter(document=indexed).update(user=None)
    answer = client.get(f"{API}/documents/{indexed.pk}/history").json()
    assert answer["results"][0]["undone_by"] is None and answer["results"][0]["user"] is None
    schema = client.get(f"{API}/schema/", {"format": "json"}).json()
    history = schema["paths"]["/v1/api/documents/{id}/history"]["get"]["responses"]["200"]
    validator = jsonschema.Draft4Validator(
        _as_jsonschema(
            {**history["content"]["application/json"]["schema"], "components": schema["components"]}
        )
    )
    assert [error.message for error in validator.iter_errors(answer)] == []


def _as_jsonschema(schema: Any) -> Any:
    """OpenAPI 3.0's ``nullable`` as JSON Schema says it (null among the types)."""
    if isinstance(schema, list):
        return [_as_jsonschema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: _as_jsonschema(value) for key, value in schema.items() if key != "nullable"}
    if schema.get("nullable") is True:
        if "type" in converted:
            converted["type"] = [converted["type"], "null"]
        else:
            converted = {"anyOf": [converted, {"type": "null"}]}
    return converted
