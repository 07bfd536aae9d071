"""Every surface answers the same fields with the same values for the same object: a document (one,
and as a list entry), a node, a job (finished, and queued behind another), a collection and a
query's answer, through the REST API (the test client), the MCP tools (the SDK's client over real
HTTP) and the command line (its JSON output). They all come from ``documents.presenters`` and
``RetrievalResult.to_answer``; this holds every surface to them, and the REST schema too."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from rest_framework.test import APIClient

from api.serializers import (
    CollectionSerializer,
    DocumentMetaSerializer,
    DocumentSerializer,
    JobSerializer,
    JobStepSerializer,
    NodeSerializer,
    QueryChunkSerializer,
    QueryDocumentSerializer,
    QueryResponseSerializer,
    RetrievalReportSerializer,
)
from documents.models import Document, IngestionJob, Node
from documents.services.collections import collection_update
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from tests.cli import run_openfable
from tests.factories import UserFactory
from tests.mcp_server.conftest import (  # noqa: F401  (fixtures)
    GUIDE,
    Person,
    connect,
    live_url,
    person,
    run_async,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

QUESTION = "How do shield volcanoes erupt?"
# Fields of a query's answer that say how this one call went, not what it found.
_PER_CALL = ("timings_ms", "cached")


class Corpus:
    """An indexed document with metadata and tags, a second one queued behind a third, and the
    collection shared with a member and offered to someone who has not accepted."""

    def __init__(self, owner: Person) -> None:
        member, invited = UserFactory.create(username="member"), UserFactory.create(username="invited")
        owner.collection.members.add(member)
        collection_update(collection=owner.collection, members=[member, invited], by=owner.user)
        self.document = document_create(
            collection=owner.collection,
            content=GUIDE,
            title="Guide",
            tags=["geology"],
            metadata={"source": "field notes", "pages": [1, 2]},
            queue=False,
        ).document
        run = job_run_now(document_id=self.document.pk)
        assert run is not None and run.succeeded
        self.job = run.job
        for text in ("Tides rise twice a day.", "Glaciers move slowly."):
            document_create(collection=owner.collection, content=text, queue=False)
        self.queued = IngestionJob.objects.filter(status=IngestionJob.Status.QUEUED).latest("created", "id")
        self.node = Node.objects.filter(document=self.document, kind=Node.Kind.LEAF).order_by("order")[1]


@pytest.fixture
def corpus(person: Person) -> Corpus:  # noqa: F811  (person: the MCP fixture)
    return Corpus(person)


def _rest(owner: Person, corpus: Corpus) -> dict[str, Any]:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {owner.key}")

    def get(path: str) -> Any:
        response = client.get(f"/v1/api/{path}")
        assert response.status_code == 200, response.content
        return response.json()

    document = get(f"documents/{corpus.document.pk}")
    listed = get("documents?status=indexed")["results"]
    asked = {"query": QUESTION, "token_budget": 300, "collection": "volcanoes"}
    query = client.post("/v1/api/query", asked, format="json")
    assert query.status_code == 200, query.content
    return {
        "document": document,
        "meta": get(f"documents/{corpus.document.pk}?meta_only=true"),
        "listed": listed[0],
        "node": get(f"nodes/{corpus.node.pk}"),
        "tree": get(f"documents/{corpus.document.pk}/tree"),
        "flat": get(f"documents/{corpus.document.pk}/tree?flat=true"),
        "page": get("documents?limit=2&offset=1"),
        "job": get(f"jobs/{corpus.job.pk}"),
        "queued": get(f"jobs/{corpus.queued.pk}"),
        "collection": get(f"collections/{owner.collection.slug}"),
        "query": query.json(),
    }


def _mcp(url: str, owner: Person, corpus: Corpus) -> dict[str, Any]:
    async def call(client: Client, tool: str, **arguments: Any) -> Any:
        result = await client.call_tool(tool, arguments)
        assert not result.is_error, result.content
        return result.structured_content

    async def scenario() -> dict[str, Any]:
        async with connect(url, "streamable-http", owner.key) as client:
            collections = (await call(client, "list_collections"))["collections"]
            listed = await call(client, "list_documents", status="indexed")
            return {
                "document": await call(client, "get_document", document_id=corpus.document.pk),
                "meta": await call(client, "get_document", document_id=corpus.document.pk, meta_only=True),
                "listed": listed["documents"][0],
                "node": await call(client, "get_node", node_id=corpus.node.pk),
                "tree": await call(client, "get_tree", document_id=corpus.document.pk),
                "flat": await call(client, "get_tree", document_id=corpus.document.pk, flat=True),
                "page": await call(client, "list_documents", limit=2, offset=1),
                "job": await call(client, "job_status", job_id=corpus.job.pk),
                "queued": await call(client, "job_status", job_id=corpus.queued.pk),
                "collection": next(found for found in collections if found["slug"] == "volcanoes"),
                "query": await call(
                    client, "query", query=QUESTION, token_budget=300, collection="volcanoes"
                ),
            }

    answers: dict[str, Any] = run_async(scenario)
    return answers


def _cli(corpus: Corpus) -> dict[str, Any]:
    def run(*args: str) -> Any:
        status, answer = run_openfable(*args)
        assert status == 0, answer
        return answer

    collections = run("collections")["collections"]
    return {
        "document": run("get", str(corpus.document.pk)),
        "meta": run("get", str(corpus.document.pk), "--meta-only"),
        "listed": run("list", "--status", "indexed")["documents"][0],
        "node": run("node", str(corpus.node.pk)),
        "tree": run("tree", str(corpus.document.pk)),
        "flat": run("tree", str(corpus.document.pk), "--flat"),
        "page": run("list", "--limit", "2", "--offset", "1"),
        "job": run("jobs", "--job", str(corpus.job.pk)),
        "queued": run("jobs", "--job", str(corpus.queued.pk)),
        "collection": next(found for found in collections if found["slug"] == "volcanoes"),
        # The same scope: the command line, a trusted caller, sees every collection.
        "query": run("query", QUESTION, "--budget", "300", "--collection", "volcanoes"),
    }


def _same_call(answer: dict[str, Any]) -> dict[str, Any]:
    """A query's answer without what differs from one call to the next (its timings, the cache)."""
    result = {key: value for key, value in answer["result"].items() if key not in _PER_CALL}
    return answer | {"result": result}


def test_every_surface_answers_the_same_fields_for_the_same_object(
    live_url: str,  # noqa: F811  (the MCP fixture)
    person: Person,  # noqa: F811
    corpus: Corpus,
) -> None:
    rest, mcp, cli = _rest(person, corpus), _mcp(live_url, person, corpus), _cli(corpus)

    # The REST API adds its own link to the file as uploaded; nothing else differs.
    for name in ("document", "meta", "listed"):
        assert rest[name].pop("original") == f"/v1/api/documents/{corpus.document.pk}/original"
    for entry in rest["query"]["documents"]:
        assert entry.pop("original") == f"/v1/api/documents/{entry['document_id']}/original"

    # A tree and a page of documents: one envelope for MCP and the command line; the REST API's
    # /v1 envelope holds the same entities (docs/rest-api.md, "One shape per entity").
    for name in ("tree", "flat"):
        assert mcp[name] == cli[name], name
        assert rest.pop(name) == mcp.pop(name)["nodes"] == cli.pop(name)["nodes"], name
    rest_page, mcp_page, cli_page = rest.pop("page"), mcp.pop("page"), cli.pop("page")
    assert mcp_page == cli_page
    assert set(mcp_page) == {"count", "offset", "limit", "next_offset", "documents"}
    assert (mcp_page["count"], mcp_page["offset"], mcp_page["limit"], mcp_page["next_offset"]) == (
        3,
        1,
        2,
        None,
    )
    for entry in rest_page["results"]:
        assert entry.pop("original").endswith("/original")
    assert rest_page["results"] == mcp_page["documents"] and rest_page["count"] == mcp_page["count"]
    assert [entry["id"] for entry in mcp_page["documents"]] == [
        document.pk for document in Document.objects.order_by("-created", "-id")[1:3]
    ], "newest first"
    rest["query"], mcp["query"], cli["query"] = (_same_call(each["query"]) for each in (rest, mcp, cli))
    for name in rest:
        assert rest[name] == mcp[name], name
        assert rest[name] == cli[name], name

    document = rest["document"]
    assert document["metadata"] == {"source": "field notes", "pages": [1, 2]}
    assert document["content"] == GUIDE and "content" not in rest["meta"] and "content" not in rest["listed"]
    assert document["latest_job"] == rest["job"] and "latest_job" not in rest["listed"]
    assert rest["node"]["content"] == GUIDE[corpus.node.start_char : corpus.node.end_char]
    assert rest["node"]["document_title"] == "Guide"
    assert rest["collection"]["members"] == ["member"] and rest["collection"]["invited"] == ["invited"]
    assert rest["collection"]["document_count"] == 3

    # One name for a finished job: ``finished``, when it ended; and its progress in words.
    assert rest["job"]["status"] == "succeeded" and rest["job"]["finished"] is not None
    assert rest["job"]["step"]["words"] == "Done" and rest["job"]["step"]["queue_ahead"] is None
    queued = rest["queued"]
    assert queued["finished"] is None and queued["step"]["words"] == "Waiting to start"
    assert queued["step"]["queue_ahead"] == 1 and queued["step"]["queue"] == "1 document ahead"

    found = rest["query"]
    assert found["routing"] in ("document_level", "node_level") and found["chunks"]
    assert all("text" not in chunk for chunk in found["result"]["chunks"]), "each passage once"

    # The schema declares exactly these fields.
    assert set(document) | {"original"} == set(DocumentSerializer().fields)
    assert set(rest["listed"]) | {"original"} == set(DocumentMetaSerializer().fields)
    assert set(rest["node"]) == set(NodeSerializer().fields)
    assert set(rest["job"]) == set(JobSerializer().fields)
    assert set(rest["job"]["step"]) == set(JobStepSerializer().fields)
    assert set(rest["collection"]) == set(CollectionSerializer().fields)
    assert set(found) == set(QueryResponseSerializer().fields)
    assert set(found["chunks"][0]) == set(QueryChunkSerializer().fields)
    assert set(found["documents"][0]) | {"original"} == set(QueryDocumentSerializer().fields)
    assert set(found["result"]) | set(_PER_CALL) == set(RetrievalReportSerializer().fields)
    assert Document.objects.get(pk=corpus.document.pk).metadata == document["metadata"]
