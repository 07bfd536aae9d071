"""`openfable list | get | tree | jobs | sweep | delete | health`: the same reads and writes as the API."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from documents.models import Document, IngestionJob
from documents.services.documents import document_create
from documents.services.jobs import job_claim, job_run_now
from tests.cli import run_openfable
from tests.factories import CollectionFactory

pytestmark = pytest.mark.django_db

TEXT = "Tide tables\n\nHigh tide comes twice a day.\n\nThe moon pulls the water.\n"


@pytest.fixture
def indexed() -> Document:
    document = document_create(
        collection=CollectionFactory.create(slug="sea"), content=TEXT, tags=["tides"], queue=False
    ).document
    run = job_run_now(document_id=document.pk)
    assert run is not None and run.succeeded
    return document


def test_list_get_tree_and_jobs(indexed: Document) -> None:
    document_create(collection=indexed.collection, content="Another text.", queue=False)
    status, listed = run_openfable("list", "--collection", "sea", "--status", "indexed")
    assert status == 0 and listed["count"] == 1 and listed["documents"][0]["document_id"] == indexed.pk
    assert listed["documents"][0]["node_count"] > 1 and "content" not in listed["documents"][0]
    status, tagged = run_openfable("list", "--tag", "tides")
    assert [entry["document_id"] for entry in tagged["documents"]] == [indexed.pk]

    status, whole = run_openfable("get", str(indexed.pk))
    assert status == 0 and whole["content"] == TEXT and whole["status"] == "indexed"
    assert "content" not in run_openfable("get", str(indexed.pk), "--meta-only")[1]

    status, tree = run_openfable("tree", str(indexed.pk))
    (root,) = tree["nodes"]
    assert status == 0 and root["kind"] == "root" and root["children"]
    status, flat = run_openfable("tree", str(indexed.pk), "--flat")
    leaves = [node for node in flat["nodes"] if node["kind"] == "leaf"]
    assert "".join(TEXT[leaf["start_char"] : leaf["end_char"]] for leaf in leaves) == TEXT

    status, jobs = run_openfable("jobs", str(indexed.pk))
    assert status == 0 and jobs["jobs"][0]["status"] == "succeeded"
    status, job = run_openfable("jobs", "--job", str(jobs["jobs"][0]["id"]))
    assert status == 0 and job["document"] == indexed.pk and job["step"]["words"] == "Done"


def test_delete_and_unknown_ids(indexed: Document) -> None:
    status, answer = run_openfable("delete", str(indexed.pk))
    assert status == 0 and answer == {"deleted": True, "document_id": indexed.pk}
    assert not Document.objects.exists()
    for command in (["get", str(indexed.pk)], ["tree", "abc"], ["delete", "999999"], ["jobs", "--job", "7"]):
        status, answer = run_openfable(*command)
        assert status == 1 and answer["code"] == "not_found" and "There is no" in answer["error"], command


def test_health_names_the_part_that_failed() -> None:
    status, answer = run_openfable("health")
    # The suite runs no Celery worker: health says so, with every other part checked.
    assert status == 1 and answer["code"] == "unhealthy" and "worker" in answer["error"]
    checks = answer["details"]["checks"]
    assert checks["database"]["ok"] and checks["pgvector"]["ok"] and checks["embeddings"]["ok"]
    assert not checks["worker"]["ok"]


def test_sweep_fails_a_stalled_job_which_reads_leave_alone() -> None:
    """Without a worker (whose timer sweeps), a person fails the stalled jobs with `openfable sweep`."""
    document = document_create(collection=CollectionFactory.create(), content=TEXT, queue=False).document
    job = job_claim(document_id=document.pk)
    assert job is not None
    IngestionJob.objects.filter(pk=job.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    status, listed = run_openfable("jobs", str(document.pk))
    assert status == 0 and listed["jobs"][0]["status"] == "running", "a read writes nothing"

    status, swept = run_openfable("sweep")
    assert status == 0 and swept == {"failed_stalled_jobs": 1, "sent_documents": []}
    job.refresh_from_db()
    assert job.status == IngestionJob.Status.FAILED and "The worker stopped while indexing" in job.error
    assert run_openfable("sweep")[1]["failed_stalled_jobs"] == 0, "once"


def test_collection_create_then_index_into_it(tmp_path: Path) -> None:
    status, made = run_openfable("collection", "create", "Annual reports")
    assert status == 0 and made["slug"] == "annual-reports" and made["name"] == "Annual reports"
    assert made["owner"] is None and made["document_count"] == 0
    status, again = run_openfable("collection", "create", "Annual reports", "--slug", "annual-reports")
    assert status == 1 and again["code"] == "conflict" and "annual-reports" in again["error"]
    notes = tmp_path / "notes.md"
    notes.write_text(TEXT, encoding="utf-8")
    status, added = run_openfable("index", str(notes), "--collection", "annual-reports")
    assert status == 0 and added["documents"][0]["collection"] == "annual-reports"


def test_list_pages_newest_first() -> None:
    collection = CollectionFactory.create(slug="pages")
    made = [
        document_create(collection=collection, content=f"Note number {n}.", queue=False).document
        for n in range(5)
    ]
    # Made in one order, listed newest first (the oldest made last here): not by id.
    for position, document in enumerate(made):
        Document.objects.filter(pk=document.pk).update(created=timezone.now() - timedelta(minutes=position))
    status, first = run_openfable("list", "--collection", "pages", "--limit", "2")
    assert status == 0 and first["count"] == 5 and first["next_offset"] == 2
    assert [entry["id"] for entry in first["documents"]] == [made[0].pk, made[1].pk]
    status, last = run_openfable("list", "--collection", "pages", "--limit", "2", "--offset", "4")
    assert [entry["id"] for entry in last["documents"]] == [made[4].pk] and last["next_offset"] is None
    status, refused = run_openfable("list", "--offset", "-1")
    assert status == 1 and "--offset" in refused["error"]


def test_table_format_and_errors_on_stderr(indexed: Document) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("openfable", "list", "--format", "table", stdout=out, stderr=err)
    lines = out.getvalue().splitlines()
    assert lines[0] == "count: 1" and err.getvalue() == ""
    header = lines[lines.index("") + 1].split()
    assert header[:3] == ["ID", "TITLE", "COLLECTION"]
    assert lines[-1].split()[0] == str(indexed.pk) and "sea" in lines[-1]

    out = io.StringIO()
    call_command("openfable", "tree", str(indexed.pk), "--format", "table", stdout=out)
    assert "root" in out.getvalue() and "  " + "Tide tables" not in out.getvalue().splitlines()[0]

    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("openfable", "get", "424242", "--format", "table", stdout=out, stderr=err)
    assert exit_.value.code == 1 and out.getvalue() == ""
    assert json.loads(err.getvalue())["code"] == "not_found"
