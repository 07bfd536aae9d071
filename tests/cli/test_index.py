"""`openfable index`: text files into a collection through document_create, indexed with --wait."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from documents.models import Collection, Document, IngestionJob, Node
from tests.cli import run_openfable
from tests.factories import CollectionFactory

pytestmark = pytest.mark.django_db

GUIDE = (
    "# Field guide\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. Stratovolcanoes erupt explosively.\n"
)
NOTES = "Tide tables\n\nHigh tide comes twice a day. The moon pulls the water.\n"


def _write(folder: Path, name: str, text: str | bytes) -> str:
    path = folder / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return str(path)


@pytest.mark.slow
def test_index_wait_indexes_each_file_and_prints_the_documents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    collection = CollectionFactory.create(slug="field-notes")
    status, answer = run_openfable(
        "index",
        _write(tmp_path, "guide.md", GUIDE),
        _write(tmp_path, "tides.txt", NOTES),
        "--collection",
        "field-notes",
        "--tags",
        "geo, sea",
        "--wait",
    )
    assert status == 0, answer
    assert [entry["title"] for entry in answer["documents"]] == ["guide", "tides"]
    for entry in answer["documents"]:
        assert entry["status"] == "indexed" and entry["job"]["status"] == "succeeded"
        assert entry["collection"] == "field-notes" and entry["node_count"] > 1
        document = Document.objects.get(pk=entry["document_id"])
        assert document.collection == collection and document.tags == ["geo", "sea"]
        leaves = Node.objects.filter(document=document, kind=Node.Kind.LEAF).order_by("order")
        assert "".join(leaf.content for leaf in leaves) == document.content
    # A line per step on stderr while it runs: the step in words and the percent of the whole.
    progress = capsys.readouterr().err.splitlines()
    first = [line for line in progress if line.startswith("[1/2] ") and line.endswith("%)")]
    assert any("Embedding" in line and "passages" in line for line in first), progress
    assert any("Finding sections" in line for line in first), progress
    assert progress[-1].startswith("[2/2] ") and "succeeded" in progress[-1]


def test_index_without_wait_queues_the_ingestion(tmp_path: Path) -> None:
    status, answer = run_openfable("index", _write(tmp_path, "tides.txt", NOTES))
    assert status == 0, answer
    (entry,) = answer["documents"]
    assert entry["collection"] == "default" and entry["status"] == "queued" and entry["created"] is True
    assert IngestionJob.objects.get(pk=entry["job"]["id"]).status == IngestionJob.Status.QUEUED
    assert "worker" in answer["note"]
    # The same text again is the same document, nothing queued twice.
    status, again = run_openfable("index", _write(tmp_path, "copy.txt", NOTES))
    assert status == 0 and again["documents"][0]["document_id"] == entry["document_id"]
    assert again["documents"][0]["created"] is False and IngestionJob.objects.count() == 1


def test_index_reads_standard_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(NOTES.encode("utf-8"))))
    status, answer = run_openfable("index", "-")
    assert status == 0, answer
    assert Document.objects.get(pk=answer["documents"][0]["document_id"]).content == NOTES


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"notes.txt": b"\xff\xfe bad bytes"}, "notes.txt"),
        ({"empty.md": "   \n"}, "The document is empty"),
    ],
)
def test_bad_files_store_nothing_and_say_which_file(
    tmp_path: Path, files: dict[str, str | bytes], message: str
) -> None:
    good = _write(tmp_path, "good.txt", NOTES)
    paths = [_write(tmp_path, name, text) for name, text in files.items()]
    status, answer = run_openfable("index", good, *paths)
    assert status == 1 and message in answer["error"]
    assert not Document.objects.exists(), "a refused batch stores none of its files"


def test_a_missing_file_or_unknown_collection_is_named(tmp_path: Path) -> None:
    status, answer = run_openfable("index", str(tmp_path / "nope.md"))
    assert status == 1 and "There is no document file" in answer["error"]
    status, answer = run_openfable("index", _write(tmp_path, "n.txt", NOTES), "--collection", "nowhere")
    assert status == 1 and "no collection 'nowhere'" in answer["error"] and answer["code"] == "not_found"
    assert not Collection.objects.filter(slug="default").exists(), "a refusal leaves no default collection"


def test_collections_are_named_by_slug_or_id_like_query_does(tmp_path: Path) -> None:
    collection = CollectionFactory.create(slug="by-id")
    status, answer = run_openfable(
        "index", _write(tmp_path, "n.txt", NOTES), "--collection", str(collection.pk)
    )
    assert status == 0, answer
    assert answer["documents"][0]["collection"] == "by-id"
    status, planned = run_openfable(
        "plan", _write(tmp_path, "g.md", GUIDE), "--collection", str(collection.pk)
    )
    assert status == 0 and planned["collection"] == "by-id"


def test_a_refused_plan_leaves_no_default_collection_behind(tmp_path: Path) -> None:
    status, answer = run_openfable("plan", _write(tmp_path, "empty.md", " \n\t\n"))
    assert status == 1 and "empty" in answer["error"]
    assert not Collection.objects.exists()


def test_tags_longer_than_the_limit_are_refused_not_cut(tmp_path: Path) -> None:
    status, answer = run_openfable("index", _write(tmp_path, "n.txt", NOTES), "--tags", "x" * 101)
    assert status == 1 and "tags hold at most 100" in answer["error"]
    assert json.dumps(answer)  # one JSON object
    assert not Document.objects.exists()
