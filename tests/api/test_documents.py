"""/v1/api/documents, /jobs, /nodes and /query through real HTTP handling (DRF's test client), real database."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from documents.models import Document, IngestionJob, Node
from documents.services.jobs import job_run_now
from tests.api.conftest import GUIDE, People
from tests.cli import run_openfable

pytestmark = pytest.mark.django_db

API = "/v1/api"


def _error(response: Any) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    return dict(body["error"])


def test_every_endpoint_wants_a_token(people: People, indexed: Document) -> None:
    anonymous = APIClient()
    node = Node.objects.filter(document=indexed).first()
    assert node is not None
    for method, url in [
        ("get", f"{API}/documents"),
        ("post", f"{API}/documents"),
        ("get", f"{API}/documents/{indexed.pk}"),
        ("get", f"{API}/documents/{indexed.pk}/tree"),
        ("get", f"{API}/nodes/{node.pk}"),
        ("post", f"{API}/query"),
        ("get", f"{API}/collections"),
        ("get", f"{API}/tokens"),
    ]:
        response = getattr(anonymous, method)(url)
        assert response.status_code == 401, (method, url)
        assert _error(response)["code"] == "not_authenticated"
        assert response["WWW-Authenticate"] == "Bearer"


def test_a_revoked_or_unknown_token_stops_working_at_once(people: People) -> None:
    owner = people.client(people.owner)
    assert owner.get(f"{API}/documents").status_code == 200
    signed_in = APIClient()
    signed_in.force_login(people.owner)  # a token cannot make tokens (tests/api/test_tokens.py)
    created = signed_in.post(f"{API}/tokens", {"name": "laptop"}, format="json")
    assert created.status_code == 201
    key, token_id = created.json()["key"], created.json()["id"]
    assert key.startswith("of_") and created.json()["prefix"] == key[:10]
    listed = owner.get(f"{API}/tokens").json()
    assert all("key" not in token for token in listed), "a key is shown once, never listed"
    laptop = APIClient()
    laptop.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert laptop.get(f"{API}/documents").status_code == 200
    assert owner.delete(f"{API}/tokens/{token_id}").status_code == 204
    refused = laptop.get(f"{API}/documents")
    assert refused.status_code == 401 and "revoked" in _error(refused)["message"]
    forged = APIClient()
    forged.credentials(HTTP_AUTHORIZATION="Bearer of_not-a-real-key")
    assert forged.get(f"{API}/documents").status_code == 401


def test_adding_a_document_answers_202_with_its_job(people: People) -> None:
    response = people.client(people.owner).post(
        f"{API}/documents",
        {"text": GUIDE, "collection": "volcanoes", "tags": ["geo"], "metadata": {"source": "test"}},
        format="json",
    )
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["created"] is True and body["job"]["status"] == "queued"
    assert body["document"]["status"] == "queued" and body["document"]["collection"] == "volcanoes"
    assert body["document"]["document_id"] == body["document"]["id"]
    assert Document.objects.get(pk=body["document"]["id"]).metadata == {"source": "test"}


def test_a_document_without_a_collection_goes_to_the_users_own(people: People) -> None:
    response = people.client(people.stranger).post(
        f"{API}/documents", {"text": "Notes of mine."}, format="json"
    )
    assert response.status_code == 202
    document = Document.objects.get(pk=response.json()["document"]["id"])
    assert document.collection.owner == people.stranger
    # ... where the owner of "volcanoes" cannot see it.
    assert people.client(people.owner).get(f"{API}/documents/{document.pk}").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_wait_true_answers_201_with_the_indexed_document(people: People, eager_tasks: None) -> None:
    response = people.client(people.owner).post(
        f"{API}/documents?wait=true", {"text": GUIDE, "collection": "volcanoes"}, format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["job"]["status"] == "succeeded" and body["document"]["status"] == "indexed"
    assert body["document"]["node_count"] > 3
    # ... and the whole asynchronous flow: job polled, then the document answers a query.
    client = people.client(people.member)
    job = client.get(f"{API}/jobs/{body['job']['id']}").json()
    assert job["status"] == "succeeded" and job["progress"] == 100
    found = client.post(
        f"{API}/query", {"query": "How do shield volcanoes erupt?", "token_budget": 300}, format="json"
    )
    assert found.status_code == 200 and found.json()["chunks"]
    assert {chunk["document_id"] for chunk in found.json()["chunks"]} == {body["document"]["id"]}


def test_a_file_can_be_uploaded(people: People) -> None:
    client = people.client(people.owner)
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile(
        "tides.md", b"# Tides\n\nHigh tide comes twice a day.\n", content_type="text/markdown"
    )
    response = client.post(
        f"{API}/documents", {"file": upload, "collection": "volcanoes"}, format="multipart"
    )
    assert response.status_code == 202, response.json()
    assert response.json()["document"]["title"] == "tides"


@pytest.mark.parametrize(
    ("payload", "status", "message"),
    [
        ({"text": ""}, 400, "The document is empty"),
        ({"text": "   \n "}, 400, "The document is empty"),
        ({}, 400, "Send the document as `text`"),
        ({"text": "ok", "collection": "nowhere"}, 404, "There is no collection 'nowhere'"),
        ({"text": "ok", "tags": ["x" * 101]}, 400, "tags hold at most 100"),
        ({"text": "ok", "metadata": [1]}, 400, "metadata must be a JSON object"),
        ({"text": "ok", "builder": "magic"}, 400, "not a valid choice"),
    ],
)
def test_bad_documents_are_refused_in_one_error_shape(
    people: People, payload: dict[str, Any], status: int, message: str
) -> None:
    response = people.client(people.owner).post(f"{API}/documents", payload, format="json")
    assert response.status_code == status, response.json()
    error = _error(response)
    assert message in error["message"] or message in str(error["details"])
    assert not Document.objects.exists()


@override_settings(MAX_DOCUMENT_BYTES=100)
def test_uploads_over_the_limit_or_not_utf8_are_refused(people: People) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = people.client(people.owner)
    big = SimpleUploadedFile("big.txt", b"x" * 1000)
    response = client.post(f"{API}/documents", {"file": big}, format="multipart")
    assert response.status_code == 400 and "the limit is 100" in str(_error(response))
    latin = SimpleUploadedFile("latin.txt", "caf\u00e9".encode("latin-1"))
    response = client.post(f"{API}/documents", {"file": latin}, format="multipart")
    assert response.status_code == 400 and "not UTF-8" in _error(response)["message"]
    assert not Document.objects.exists()


def test_the_permission_matrix(people: People, indexed: Document) -> None:
    node = Node.objects.filter(document=indexed, kind=Node.Kind.LEAF).first()
    job = IngestionJob.objects.filter(document=indexed).first()
    assert node is not None and job is not None
    urls = [
        f"{API}/documents/{indexed.pk}",
        f"{API}/documents/{indexed.pk}/tree",
        f"{API}/nodes/{node.pk}",
        f"{API}/jobs/{job.pk}",
        f"{API}/collections/{people.collection.pk}",
    ]
    for user in (people.owner, people.member):
        client = people.client(user)
        assert all(client.get(url).status_code == 200 for url in urls), user
    stranger = people.client(people.stranger)
    for url in urls:
        response = stranger.get(url)
        assert response.status_code == 404 and _error(response)["code"] == "not_found", url
    assert stranger.get(f"{API}/documents").json()["results"] == []
    assert stranger.patch(f"{API}/nodes/{node.pk}", {"title": "x"}, format="json").status_code == 404
    assert stranger.delete(f"{API}/documents/{indexed.pk}").status_code == 404
    result = stranger.post(f"{API}/query", {"query": "volcano eruptions", "token_budget": 500}, format="json")
    assert result.status_code == 200 and result.json()["chunks"] == [], (
        "a stranger never gets another's chunks"
    )


def test_list_filters_search_and_pages(people: People, indexed: Document) -> None:
    client = people.client(people.owner)
    client.post(
        f"{API}/documents",
        {"text": "Tide tables.", "collection": "volcanoes", "tags": ["sea"]},
        format="json",
    )
    everything = client.get(f"{API}/documents").json()
    assert everything["count"] == 2 and "content" not in everything["results"][0]
    assert [d["title"] for d in client.get(f"{API}/documents?tag=sea").json()["results"]] == ["Tide tables."]
    assert [d["title"] for d in client.get(f"{API}/documents?status=indexed").json()["results"]] == ["Guide"]
    assert client.get(f"{API}/documents?search=guid").json()["count"] == 1
    assert client.get(f"{API}/documents?limit=1").json()["next"] is not None
    assert client.get(f"{API}/documents?created_after=2999-01-01").json()["count"] == 0
    bad = client.get(f"{API}/documents?created_after=yesterday")
    assert bad.status_code == 400 and "is not a date" in _error(bad)["message"]


def test_get_patch_and_delete_a_document(people: People, indexed: Document) -> None:
    client = people.client(people.member)
    whole = client.get(f"{API}/documents/{indexed.pk}").json()
    assert (whole["content"] == GUIDE and whole["node_count"] is None) or isinstance(whole["node_count"], int)
    assert "content" not in client.get(f"{API}/documents/{indexed.pk}?meta_only=true").json()
    patched = client.patch(
        f"{API}/documents/{indexed.pk}", {"title": "Volcano guide", "tags": ["b", "a"]}, format="json"
    )
    assert patched.status_code == 200 and patched.json()["tags"] == ["a", "b"]
    assert patched.json()["title"] == "Volcano guide"
    assert client.delete(f"{API}/documents/{indexed.pk}").status_code == 204
    assert not Document.objects.filter(pk=indexed.pk).exists()


def test_reindex_queues_a_job(people: People, indexed: Document) -> None:
    response = people.client(people.owner).post(f"{API}/documents/{indexed.pk}/reindex", {}, format="json")
    assert response.status_code == 202
    assert response.json()["job"]["reindex"] is True and response.json()["job"]["status"] == "queued"


def test_one_build_per_document_a_reindex_while_one_runs_is_refused(
    people: People, indexed: Document
) -> None:
    """A re-index while a build runs is refused (409) instead of starting a second build beside
    it; one while a job still waits in the queue is that job; and the database itself refuses a
    second unfinished job."""
    from django.db import IntegrityError, transaction

    from documents.services.jobs import job_claim

    client = people.client(people.owner)
    url = f"{API}/documents/{indexed.pk}/reindex"
    queued = client.post(url, {}, format="json")
    assert queued.status_code == 202
    again = client.post(url, {"builder": "structural"}, format="json")
    assert again.status_code == 202 and again.json()["job"]["id"] == queued.json()["job"]["id"]
    assert IngestionJob.objects.get(pk=queued.json()["job"]["id"]).builder_requested == "structural"

    running = job_claim(document_id=indexed.pk)
    assert running is not None
    refused = client.post(url, {}, format="json")
    assert refused.status_code == 409
    error = _error(refused)
    assert error["code"] == "conflict" and f"job {running.pk}" in error["message"]
    assert "being indexed now" in error["message"] and "Wait until" in error["message"]
    assert IngestionJob.objects.filter(document=indexed, status__in=["queued", "running"]).count() == 1
    indexed.refresh_from_db()
    assert indexed.status == Document.Status.INDEXING, "the document says what its job says"

    with pytest.raises(IntegrityError), transaction.atomic():
        IngestionJob.objects.create(document=indexed)


def test_the_tree_nested_and_flat(people: People, indexed: Document) -> None:
    client = people.client(people.owner)
    (root,) = client.get(f"{API}/documents/{indexed.pk}/tree").json()
    assert root["kind"] == "root" and root["children"]
    leaves: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        if node["kind"] == "leaf":
            leaves.append(node)
        for child in node["children"]:
            walk(child)

    walk(root)
    assert "".join(GUIDE[leaf["start_char"] : leaf["end_char"]] for leaf in leaves) == GUIDE
    flat = client.get(f"{API}/documents/{indexed.pk}/tree?flat=true").json()
    assert len(flat) == Node.objects.filter(document=indexed).count() and flat[0]["parent"] is None
    assert all("children" not in node for node in flat)


def test_a_node_edit_goes_through_node_update(people: People, indexed: Document) -> None:
    section = Node.objects.filter(document=indexed, kind=Node.Kind.SECTION).first()
    assert section is not None
    client = people.client(people.member)
    response = client.patch(f"{API}/nodes/{section.pk}", {"title": "How they form"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["title"] == "How they form" and body["edited"] and body["embedding_stale"]
    assert body["content"] == GUIDE[body["start_char"] : body["end_char"]]
    refused = client.patch(f"{API}/nodes/{section.pk}", {"title": " "}, format="json")
    assert refused.status_code == 400 and "needs a title" in _error(refused)["message"]


@pytest.mark.parametrize(
    ("budget", "message"), [(99, "outside the accepted range"), (32001, "outside the accepted range")]
)
def test_query_budgets_out_of_range_are_refused(people: People, budget: int, message: str) -> None:
    response = people.client(people.owner).post(
        f"{API}/query", {"query": "volcano", "token_budget": budget}, format="json"
    )
    assert response.status_code == 400 and message in _error(response)["message"]


def test_query_answers_in_the_original_shape_with_the_full_result(people: People, indexed: Document) -> None:
    response = people.client(people.owner).post(
        f"{API}/query",
        {"query": "How do stratovolcanoes erupt?", "token_budget": 100, "mode": "vector"},
        format="json",
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (
        body["routing"] in {"document_level", "node_level"}
        and body["query"] == "How do stratovolcanoes erupt?"
    )
    assert 0 < body["total_tokens"] <= 100
    assert body["chunks"] and [c["position"] for c in body["chunks"]] == list(range(len(body["chunks"])))
    for chunk in body["chunks"]:
        assert set(chunk) >= {
            "node_id",
            "document_id",
            "content",
            "token_count",
            "score",
            "position",
            "source",
        }
    assert body["documents"][0]["document_id"] == indexed.pk
    assert body["result"]["token_budget"] == 100 and body["result"]["paths_run"]


# -- the agent path's working state is not the user's metadata ------------------------------------

AGENT_TREE = {
    "title": "Field guide",
    "summary": "How volcanoes form and erupt.",
    "sections": [
        {"title": "Introduction", "summary": "What the guide covers.", "chunks": [0], "sections": []},
        {"title": "Formation", "summary": "Magma reaching the surface.", "chunks": [1], "sections": []},
        {"title": "Eruptions", "summary": "Gentle and explosive.", "chunks": [2], "sections": []},
    ],
}


def _planned_and_chunked(people: People, tmp_path: Any) -> int:
    guide = tmp_path / "guide.md"
    guide.write_text(GUIDE)
    markers = tmp_path / "markers.txt"
    markers.write_text("## Formation\n## Eruptions\n")
    status, planned = run_openfable("plan", str(guide), "--collection", people.collection.slug)
    assert status == 0, planned
    status, chunked = run_openfable("apply-chunks", str(planned["document_id"]), str(markers))
    assert status == 0 and chunked["chunk_count"] == 3, chunked
    return int(planned["document_id"])


def test_a_metadata_patch_between_apply_chunks_and_apply_tree_keeps_the_chunks(
    people: People, tmp_path: Any
) -> None:
    document_id = _planned_and_chunked(people, tmp_path)
    client = people.client(people.owner)
    patched = client.patch(
        f"{API}/documents/{document_id}", {"metadata": {"source": "field notes"}}, format="json"
    )
    assert patched.status_code == 200 and patched.json()["metadata"] == {"source": "field notes"}

    tree = tmp_path / "tree.json"
    tree.write_text(json.dumps(AGENT_TREE))
    status, saved = run_openfable("apply-tree", str(document_id), str(tree))
    assert status == 0, saved
    assert saved["builder"] == "agent" and saved["leaves"] == 3
    shown = client.get(f"{API}/documents/{document_id}?meta_only=true").json()
    assert shown["metadata"] == {"source": "field notes"}  # the agent's state is not shown as the user's


def test_a_rest_reindex_by_another_builder_takes_a_document_out_of_the_agent_path(
    people: People, tmp_path: Any
) -> None:
    document_id = _planned_and_chunked(people, tmp_path)
    response = people.client(people.owner).post(
        f"{API}/documents/{document_id}/reindex", {"builder": "structural"}, format="json"
    )
    assert response.status_code == 202
    run = job_run_now(document_id=document_id)
    assert run is not None and run.succeeded
    markers = tmp_path / "again.txt"
    markers.write_text("## Eruptions\n")
    status, refused = run_openfable("apply-chunks", str(document_id), str(markers))
    assert status == 1 and refused["code"] == "not_in_agent_path"
    assert refused["error"] == (
        f"Document {document_id} is not in the agent path: its tree was built by the structural builder. "
        "Plan its text first (the same text in the same collection is this document); its tree keeps "
        "serving queries until the agent's replaces it. Next: `openfable plan PATH --collection SLUG`."
    )
