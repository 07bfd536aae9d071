"""A typed client generated from the schema the server serves (openapi-python-client, as an
integrator runs it) drives a whole flow against a live server over real HTTP: a collection, a text
and a PDF uploaded, their jobs waited for, a tree walked through typed children, a query, a page
of documents, each original downloaded byte for byte, and a delete."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.documents.ingestion import document_files as files
from tests.integrations.conftest import Person

pytestmark = pytest.mark.slow

GENERATOR = Path(sys.executable).with_name("openapi-python-client")
NOTES = (
    "# Tides\n\nThe moon pulls the oceans.\n\n## Spring tides\n\nAt new and full moon the sun and the moon "
    "pull together and the tides run highest.\n\n## Neap tides\n\nAt the quarter moons they pull apart.\n"
)


def generated_client(live_url: str, key: str, folder: Path) -> ModuleType:
    """The schema served at /v1/api/schema/, turned into a package by openapi-python-client, imported."""
    schema = httpx.get(
        f"{live_url}/v1/api/schema/", params={"format": "json"}, headers={"Authorization": f"Bearer {key}"}
    )
    assert schema.status_code == 200, schema.text
    (folder / "schema.json").write_bytes(schema.content)
    run = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            "schema.json",
            "--output-path",
            "openfable_api",
            "--meta",
            "none",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
        # Its post-hooks format the package with ruff, from this environment.
        env={"PATH": f"{GENERATOR.parent}:/usr/bin:/bin", "HOME": str(folder)},
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "Warning" not in output and "Skipping" not in output, output
    for name in [name for name in sys.modules if name.split(".")[0] == "openfable_api"]:
        del sys.modules[name]  # one generated earlier in this session
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module("openfable_api")
    finally:
        sys.path.remove(str(folder))


def _v1(name: str) -> Any:
    return importlib.import_module(f"openfable_api.api.v1.{name}")


def _walk(node: Any, depth: int = 0) -> list[tuple[int, Any]]:
    """Every node under ``node`` with its depth, through the typed ``children``."""
    found = [(depth, node)]
    for child in node.children or []:
        found += _walk(child, depth + 1)
    return found


def test_a_generated_client_runs_the_whole_flow(
    live_url: str, person: Person, eager_tasks: None, file_storage: Path, tmp_path: Path
) -> None:
    generated_client(live_url, person.key, tmp_path)
    models = importlib.import_module("openfable_api.models")
    types = importlib.import_module("openfable_api.types")
    client = importlib.import_module("openfable_api.client").AuthenticatedClient(
        base_url=live_url, token=person.key, timeout=httpx.Timeout(120)
    )
    # The names read like the entities.
    assert {"QueryRequest", "QueryResponse", "TreeNode", "RetrievalReport", "HealthCheck"} <= set(dir(models))
    assert "QueryRequestRequest" not in dir(models)

    collection = _v1("v1_api_collections_create").sync(
        client=client, body=models.CollectionCreateRequest(name="Reports", slug="reports")
    )
    assert isinstance(collection, models.Collection) and collection.slug == "reports"

    text = _v1("v1_api_documents_create").sync(
        client=client,
        body=models.DocumentCreateRequest(text=NOTES, title="Tides", collection="reports", tags=["sea"]),
    )
    pdf_bytes = files.report_pdf(pages=2)
    pdf = _v1("v1_api_documents_create").sync(
        client=client,
        body=models.DocumentUploadRequest(
            file=types.File(payload=pdf_bytes, file_name="supply.pdf", mime_type="application/pdf"),
            collection="reports",
            tags=["contracts"],
        ),
    )
    assert isinstance(text, models.DocumentCreated) and isinstance(pdf, models.DocumentCreated), (text, pdf)

    # Wait: each job polled until it has finished.
    for created in (text, pdf):
        deadline = time.monotonic() + 120
        while (job := _v1("v1_api_jobs_retrieve").sync(created.job.id, client=client)).status not in (
            models.JobStatusEnum.SUCCEEDED,
            models.JobStatusEnum.FAILED,
        ):
            assert time.monotonic() < deadline, job
            time.sleep(0.5)
        assert job.status == models.JobStatusEnum.SUCCEEDED, job.error

    # The tree, walked through typed children: every node a TreeNode with all its fields.
    (root,) = _v1("v1_api_documents_tree_list").sync(pdf.document_id, client=client)
    nodes = _walk(root)
    assert all(isinstance(node, models.TreeNode) for _, node in nodes)
    assert all(node.depth == depth for depth, node in nodes)
    assert root.children and root.children[0].children is not types.UNSET
    assert {node.excluded for _, node in nodes} == {False} and {
        node.embedding_stale for _, node in nodes
    } == {False}
    leaves = [node for _, node in nodes if not node.children]
    assert leaves and all(node.pages for node in leaves)

    # A query: the k best passages, best first, with a typed report and each document once.
    answer = _v1("v1_api_query_create").sync(
        client=client,
        body=models.QueryRequest(
            query="When does the buyer pay each invoice?",
            top_k=3,
            order=models.OrderEnum.SCORE,
            collection="reports",
        ),
    )
    assert isinstance(answer, models.QueryResponse), answer
    assert 1 <= len(answer.chunks) <= 3
    scores = [chunk.score for chunk in answer.chunks]
    assert scores == sorted(scores, reverse=True)
    assert isinstance(answer.result, models.RetrievalReport) and answer.result.top_k == 3
    assert all(isinstance(path, models.PathReport) for path in answer.result.paths)
    assert answer.result.llm_usage.calls == 0
    documents = {document.document_id: document for document in answer.documents}
    assert {chunk.document_id for chunk in answer.chunks} <= set(documents)
    assert documents[pdf.document_id].source_filename == "supply.pdf"
    assert documents[pdf.document_id].tags == ["contracts"]

    # A page of documents at a time.
    first = _v1("v1_api_documents_list").sync(client=client, collection="reports", limit=1)
    second = _v1("v1_api_documents_list").sync(client=client, collection="reports", limit=1, offset=1)
    assert first.count == 2 and second.count == 2 and first.next_ and second.previous
    assert {first.results[0].id, second.results[0].id} == {text.document_id, pdf.document_id}

    # Each original, byte for byte, whatever its media type.
    original = _v1("v1_api_documents_original_retrieve")
    downloaded = original.sync(pdf.document_id, client=client)
    assert isinstance(downloaded, types.File) and downloaded.payload.read() == pdf_bytes
    assert original.sync(text.document_id, client=client).payload.read() == NOTES.encode()

    # Health: typed checks, by part.
    health = _v1("v1_api_health_retrieve").sync(client=client)
    assert isinstance(health, models.Health)
    assert all(
        isinstance(check, models.HealthCheck) for check in health.checks.additional_properties.values()
    )

    # Delete: 204, then the document is gone (404 in the one error shape).
    assert _v1("v1_api_documents_destroy").sync_detailed(text.document_id, client=client).status_code == 204
    gone = _v1("v1_api_documents_retrieve").sync(text.document_id, client=client)
    assert isinstance(gone, models.Error) and gone.error.code == "not_found"
