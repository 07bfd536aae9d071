"""The agent path end to end: `openfable plan | apply-chunks | apply-tree` on the real database.

Commands run through ``call_command`` (the same parser and dispatcher as ``manage.py``), and once
through the installed ``openfable`` console script in a subprocess. Trees are embedded with the
real local model; the texts are short so that stays quick.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from documents.ingestion.tree_schema import MARKERS_JSON_SCHEMA, TREE_JSON_SCHEMA
from documents.models import AgentState, Document, IngestionJob, Node
from documents.services.agent import agent_apply_chunks, agent_apply_tree, agent_plan, parse_markers_file
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from tests.cli import run_openfable as run
from tests.conftest import REPO_ROOT
from tests.factories import CollectionFactory

TEXT = (
    "# Field guide\n\nA short guide to volcanoes and their eruptions.\n\n"
    "## Formation\n\nVolcanoes form where magma reaches the surface. Most sit on plate boundaries.\n\n"
    "## Eruptions\n\nShield volcanoes erupt gently. "
    "Stratovolcanoes erupt explosively and build steep cones.\n"
)
MARKERS = {"markers": ["## Formation", "## Eruptions"]}  # the text before the first is chunk 0
TREE: dict[str, Any] = {
    "title": "Field guide",
    "summary": "How volcanoes form and erupt.",
    "sections": [
        {"title": "Introduction", "summary": "What the guide covers.", "chunks": [0], "sections": []},
        {
            "title": "Volcanoes",
            "summary": "Formation and eruptions.",
            "chunks": [],
            "sections": [
                {
                    "title": "Formation",
                    "summary": "Magma reaching the surface.",
                    "chunks": [1],
                    "sections": [],
                },
                {"title": "Eruptions", "summary": "Gentle and explosive.", "chunks": [2], "sections": []},
            ],
        },
    ],
}


def write(folder: Path, name: str, content: str | bytes | dict[str, Any]) -> str:
    path = folder / name
    if isinstance(content, dict):
        content = json.dumps(content)
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return str(path)


def plan_and_chunk(folder: Path) -> int:
    status, planned = run(
        "plan", write(folder, "guide.md", TEXT), "--collection", CollectionFactory.create().slug
    )
    assert status == 0, planned
    document_id = int(planned["document_id"])
    status, chunked = run("apply-chunks", str(document_id), write(folder, "markers.json", MARKERS))
    assert status == 0, chunked
    return document_id


@pytest.mark.django_db
def test_plan_chunks_and_tree_save_an_agent_tree_whose_leaves_are_exact_slices(tmp_path: Path) -> None:
    collection = CollectionFactory.create()
    path = write(tmp_path, "guide.md", TEXT)
    status, planned = run("plan", path, "--collection", collection.slug, "--title", "Guide", "--tags", "a, b")
    assert status == 0
    document_id = planned["document_id"]
    assert planned["created"] is True and planned["title"] == "Guide"
    assert planned["characters"] == len(TEXT) and planned["tokens"] > 0
    assert planned["instructions"]["markers_schema"] == MARKERS_JSON_SCHEMA
    assert planned["instructions"]["next"] == f"openfable apply-chunks {document_id} markers.json"
    document = Document.objects.get(pk=document_id)
    assert document.tags == ["a", "b"] and document.collection == collection

    status, again = run("plan", path, "--collection", collection.slug)
    assert status == 0 and again["document_id"] == document_id and again["created"] is False

    status, chunked = run("apply-chunks", str(document_id), write(tmp_path, "markers.json", MARKERS))
    assert status == 0
    assert chunked["markers"] == 2 and chunked["chunk_count"] == 3
    starts = [chunk["start_char"] for chunk in chunked["chunks"]]
    assert starts == [0, TEXT.index("## Formation"), TEXT.index("## Eruptions")]
    assert [chunk["index"] for chunk in chunked["chunks"]] == [0, 1, 2]
    assert chunked["chunks"][1]["opening"].startswith("## Formation Volcanoes form where magma")
    assert chunked["chunks"][1]["opening"].endswith("\u2026")
    assert all(chunk["tokens"] > 0 for chunk in chunked["chunks"])
    assert chunked["instructions"]["tree_schema"] == TREE_JSON_SCHEMA
    assert chunked["instructions"]["next"] == f"openfable apply-tree {document_id} tree.json"

    status, saved = run("apply-tree", str(document_id), write(tmp_path, "tree.json", TREE))
    assert status == 0, saved
    assert saved["status"] == "indexed" and saved["builder"] == "agent"
    assert saved["nodes"] == 8 and saved["leaves"] == 3
    assert [section["title"] for section in saved["sections"]] == ["Introduction", "Volcanoes"]
    assert [sub["title"] for sub in saved["sections"][1]["sections"]] == ["Formation", "Eruptions"]

    document.refresh_from_db()
    assert document.builder == Document.Builder.AGENT and document.status == Document.Status.INDEXED
    nodes = list(Node.objects.filter(document=document).order_by("order"))
    leaves = [node for node in nodes if node.kind == Node.Kind.LEAF]
    assert "".join(leaf.content for leaf in leaves) == TEXT
    assert all(leaf.content == TEXT[leaf.start_char : leaf.end_char] for leaf in leaves)
    assert all(node.embedding is not None and len(node.embedding) == 384 for node in nodes)
    formation = next(node for node in nodes if node.title == "Formation")
    assert formation.kind == Node.Kind.SUBSECTION and formation.toc_path == "Guide › Volcanoes › Formation"
    # The job plan created is the one that ran: nothing is left queued.
    jobs = IngestionJob.objects.filter(document=document)
    assert [(job.status, job.builder_requested) for job in jobs] == [("succeeded", "agent")]
    assert AgentState.objects.get(document=document).tree == TREE
    assert "agent" not in document.metadata  # the working state is not the user's metadata


@pytest.mark.django_db
def test_a_marker_that_is_not_in_the_text_is_named_with_the_offset_searched_from(tmp_path: Path) -> None:
    status, planned = run("plan", write(tmp_path, "guide.md", TEXT))
    assert status == 0
    markers = write(tmp_path, "markers.txt", "## Eruptions\n## Formation\n")  # out of order
    status, answer = run("apply-chunks", str(planned["document_id"]), markers)
    assert status == 1
    after = TEXT.index("## Eruptions") + 1
    assert "'## Formation'" in answer["error"] and f"after character {after}" in answer["error"]
    assert answer["error"].endswith(
        f"Fix that marker and apply the markers again. Next: `openfable apply-chunks {planned['document_id']} "
        "markers.json`."
    )
    assert answer["details"]["next_step"] == "apply_chunks"
    assert AgentState.objects.get(document_id=planned["document_id"]).chunks == []


@pytest.mark.django_db
def test_markers_come_one_per_line_or_as_json_on_standard_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, planned = run("plan", write(tmp_path, "guide.md", TEXT))
    document_id = str(planned["document_id"])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\n## Formation\n\n## Eruptions\n")))
    status, by_line = run("apply-chunks", document_id, "-")
    assert status == 0 and by_line["chunk_count"] == 3
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'```json\n["## Eruptions"]\n```')))
    status, fenced = run("apply-chunks", document_id, "-")
    assert status == 0 and fenced["chunk_count"] == 2
    assert parse_markers_file("[1] Scope of work\n[2] Fees") == ["[1] Scope of work", "[2] Fees"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"markers": []}', '"markers" is empty'),
        ("  \n\n", "The markers file is empty"),
        ('{"markers": ["## Formation"', "not valid JSON"),
        ('{"marks": ["## Formation"]}', 'unexpected key(s) "marks"'),
    ],
)
def test_empty_or_malformed_markers_are_refused(tmp_path: Path, content: str, message: str) -> None:
    status, planned = run("plan", write(tmp_path, "guide.md", TEXT))
    status, answer = run("apply-chunks", str(planned["document_id"]), write(tmp_path, "m.json", content))
    assert status == 1 and message in answer["error"]


@pytest.mark.django_db
def test_a_tree_with_missing_or_repeated_chunks_is_refused_with_the_indexes(tmp_path: Path) -> None:
    document_id = plan_and_chunk(tmp_path)
    bad = json.loads(json.dumps(TREE))
    bad["sections"][0]["chunks"] = [0, 1]  # chunk 1 again below; chunk 2 nowhere
    bad["sections"][1]["sections"][1]["chunks"] = [1]
    status, answer = run("apply-tree", str(document_id), write(tmp_path, "tree.json", bad))
    assert status == 1
    assert "chunk(s) 1 appear more than once" in answer["error"]
    assert "chunk(s) 2 are missing" in answer["error"]
    assert (
        f"Fix the tree and apply it again. Next: `openfable apply-tree {document_id} tree.json`."
        in (answer["error"])
    )
    invented = json.loads(json.dumps(TREE))
    invented["sections"][0]["chunks"] = [0, 7]
    status, answer = run("apply-tree", str(document_id), write(tmp_path, "tree.json", invented))
    assert status == 1 and "unknown chunk index(es) 7" in answer["error"]
    assert not Node.objects.filter(document_id=document_id).exists()
    assert not IngestionJob.objects.filter(document_id=document_id, status="running").exists()


@pytest.mark.django_db
def test_apply_tree_before_apply_chunks_says_to_run_apply_chunks(tmp_path: Path) -> None:
    status, planned = run("plan", write(tmp_path, "guide.md", TEXT))
    status, answer = run("apply-tree", str(planned["document_id"]), write(tmp_path, "tree.json", TREE))
    assert status == 1
    assert f"apply-chunks {planned['document_id']}" in answer["error"]


@pytest.mark.django_db
def test_agent_steps_on_a_structural_document_are_refused_until_it_is_planned(tmp_path: Path) -> None:
    collection = CollectionFactory.create()
    document = document_create(
        collection=collection, content=TEXT, builder="structural", queue=False
    ).document
    run_ = job_run_now(document_id=document.pk)
    assert run_ is not None and run_.succeeded
    metadata_before = Document.objects.get(pk=document.pk).metadata
    markers = write(tmp_path, "markers.json", MARKERS)
    for command, file in (("apply-chunks", markers), ("apply-tree", write(tmp_path, "tree.json", TREE))):
        status, answer = run(command, str(document.pk), file)
        assert status == 1 and answer["code"] == "not_in_agent_path", answer
        assert answer["error"].startswith(
            f"Document {document.pk} is not in the agent path: its tree was built by the structural builder."
        )
        assert answer["error"].endswith("Next: `openfable plan PATH --collection SLUG`.")
        assert answer["details"] == {"document_id": document.pk, "next_step": "plan"}
    document.refresh_from_db()
    assert document.metadata == metadata_before and document.builder == "structural"
    assert not AgentState.objects.exists()

    # Planning the same text hands that document to the agent: its steps run, and the agent's
    # tree replaces the structural one.
    status, planned = run("plan", write(tmp_path, "guide.md", TEXT), "--collection", collection.slug)
    assert status == 0 and planned["document_id"] == document.pk and planned["created"] is False
    assert run("apply-chunks", str(document.pk), markers)[0] == 0
    status, saved = run("apply-tree", str(document.pk), write(tmp_path, "tree.json", TREE))
    assert status == 0 and saved["builder"] == "agent", saved


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("caf\xe9 au lait".encode("latin-1"), "not UTF-8 text (invalid byte at position 3)"),
        (b"", "The document is empty"),
        (b" \n\t\n", "The document is empty"),
    ],
)
def test_plan_refuses_files_that_are_not_text(tmp_path: Path, content: bytes, message: str) -> None:
    status, answer = run("plan", write(tmp_path, "doc.txt", content))
    assert status == 1 and message in answer["error"]
    assert not Document.objects.exists()


@pytest.mark.django_db
def test_missing_files_unknown_ids_and_unknown_collections_are_named(tmp_path: Path) -> None:
    status, answer = run("plan", str(tmp_path / "nope.md"))
    assert status == 1 and "There is no document file" in answer["error"]
    status, answer = run("plan", write(tmp_path, "guide.md", TEXT), "--collection", "nowhere")
    assert status == 1 and "no collection 'nowhere'" in answer["error"]
    markers = write(tmp_path, "markers.json", MARKERS)
    for command in ("apply-chunks", "apply-tree"):
        status, answer = run(command, "987654", markers)
        assert status == 1 and "There is no document 987654" in answer["error"]
        status, answer = run(command, "abc", markers)
        assert status == 1 and "'abc' is not a document id" in answer["error"]


@pytest.mark.django_db
def test_running_a_step_again_replaces_its_result(tmp_path: Path) -> None:
    document_id = plan_and_chunk(tmp_path)
    tree_file = write(tmp_path, "tree.json", TREE)
    assert run("apply-tree", str(document_id), tree_file)[0] == 0
    first_ids = set(Node.objects.filter(document_id=document_id).values_list("pk", flat=True))

    status, saved = run("apply-tree", str(document_id), tree_file)
    assert status == 0
    second_ids = set(Node.objects.filter(document_id=document_id).values_list("pk", flat=True))
    assert len(second_ids) == len(first_ids) == saved["nodes"]
    assert first_ids.isdisjoint(second_ids), "the tree was replaced, not appended to"
    assert IngestionJob.objects.filter(document_id=document_id, status="succeeded").count() == 2

    # New chunks replace the old ones and forget the tree built over them; the saved nodes keep
    # serving until the next apply-tree.
    status, chunked = run(
        "apply-chunks", str(document_id), write(tmp_path, "m2.json", {"markers": ["## Eruptions"]})
    )
    assert status == 0 and chunked["chunk_count"] == 2
    state = AgentState.objects.get(document_id=document_id)
    assert state.chunks == [[0, TEXT.index("## Eruptions")], [TEXT.index("## Eruptions"), len(TEXT)]]
    assert state.tree is None
    assert set(Node.objects.filter(document_id=document_id).values_list("pk", flat=True)) == second_ids
    status, answer = run("apply-tree", str(document_id), tree_file)  # 3 chunks named, 2 exist
    assert status == 1 and "unknown chunk index(es) 2" in answer["error"]
    two = {
        "title": "Field guide",
        "summary": "Volcanoes.",
        "sections": [
            {"title": "Before eruptions", "summary": "Intro and formation.", "chunks": [0], "sections": []},
            {"title": "Eruptions", "summary": "Gentle and explosive.", "chunks": [1], "sections": []},
        ],
    }
    status, saved = run("apply-tree", str(document_id), write(tmp_path, "two.json", two))
    assert status == 0 and saved["leaves"] == 2 and saved["nodes"] == 5
    assert Node.objects.filter(document_id=document_id).count() == 5


def _subprocess_env() -> dict[str, str]:
    db = connection.settings_dict
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    env["OPENFABLE_DATABASE_URL"] = f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}"
    env["OPENFABLE_SECRET_KEY"] = "x" * 50  # a DATABASE_URL without DEBUG counts as production
    return env


def _script(*args: str, stdin: str | None = None) -> tuple[int, dict[str, Any]]:
    script = Path(sys.executable).parent / "openfable"
    if not script.exists():
        pytest.fail(f"{script} is missing: run `.venv/bin/pip install -e . --no-deps`")
    result = subprocess.run(
        [str(script), *args],
        cwd=REPO_ROOT,
        env=_subprocess_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
    )
    # The answer on stdout; an error on stderr (its last line), with nothing on stdout.
    lines = (result.stdout if result.returncode == 0 else result.stderr).strip().splitlines()
    assert result.returncode == 0 or result.stdout == "", result.stdout
    assert lines and (result.returncode != 0 or len(lines) == 1), (
        f"expected one JSON line, got {result.stdout!r}; stderr: {result.stderr}"
    )
    return result.returncode, json.loads(lines[-1])


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_the_openfable_console_script_runs_the_same_steps(tmp_path: Path) -> None:
    status, planned = _script("plan", write(tmp_path, "guide.md", TEXT))
    assert status == 0 and planned["created"] is True
    document_id = str(planned["document_id"])
    status, chunked = _script("apply-chunks", document_id, "-", stdin="## Formation\n## Eruptions\n")
    assert status == 0 and chunked["chunk_count"] == 3
    status, saved = _script("apply-tree", document_id, "-", stdin=json.dumps(TREE))
    assert status == 0 and saved["builder"] == "agent" and saved["nodes"] == 8
    leaves = Node.objects.filter(document_id=planned["document_id"], kind="leaf").order_by("order")
    assert "".join(leaf.content for leaf in leaves) == TEXT
    status, answer = _script("apply-tree", "424242", "-", stdin="{}")
    assert status == 1 and "There is no document 424242" in answer["error"]


# -- property: whatever the markers and the sections, the leaves partition the text exactly -------

_WORDS = ["alpha", "Beta", "gamma,", "delta.", "naïve", "Straße", "«quoted»", "x", "1.2", "—", "end"]
_paragraphs = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=10).map(" ".join)
_texts = st.lists(_paragraphs, min_size=1, max_size=5).map("\n\n".join)


def _sections(data: st.DataObject, count: int, first: int, depth: int) -> list[dict[str, Any]]:
    """Random sections over chunks first..first+count-1, in order, with subsections one level down."""
    sections: list[dict[str, Any]] = []
    position = first
    while position < first + count:
        size = data.draw(st.integers(1, first + count - position))
        own, below = size, 0
        if depth < 2 and size > 1 and data.draw(st.booleans()):
            own = data.draw(st.integers(0, size - 1))
            below = size - own
        sections.append(
            {
                "title": f"Part {position}",
                "summary": f"Chunks {position} to {position + size - 1}.",
                "chunks": list(range(position, position + own)),
                "sections": _sections(data, below, position + own, depth + 1) if below else [],
            }
        )
        position += size
    return sections


@pytest.mark.django_db
@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts, data=st.data())
def test_agent_leaves_partition_the_document_exactly(text: str, data: st.DataObject) -> None:
    document = agent_plan(collection=CollectionFactory.create(), content=text).document
    words = [(match.start(), match.end()) for match in re.finditer(r"\S+", text)]
    picked = sorted(data.draw(st.sets(st.integers(0, len(words) - 1), max_size=8)))
    markers = []
    for index in picked:
        length = data.draw(st.integers(1, 3))
        markers.append(" ".join(text[start:end] for start, end in words[index : index + length]))
    if not markers:
        markers = [text[words[0][0] : words[0][1]]]

    spans = agent_apply_chunks(document=document, markers=markers)
    tree = {"title": "Doc", "summary": "All of it.", "sections": _sections(data, len(spans), 0, 1)}
    agent_apply_tree(document=document, data=tree)

    document.refresh_from_db()
    assert document.builder == Document.Builder.AGENT and document.status == Document.Status.INDEXED
    leaves = list(Node.objects.filter(document=document, kind="leaf").order_by("order"))
    assert [(leaf.start_char, leaf.end_char) for leaf in leaves] == spans
    assert "".join(leaf.content for leaf in leaves) == document.content == text
    cursor = 0
    for leaf in leaves:
        assert leaf.start_char == cursor and leaf.content == text[leaf.start_char : leaf.end_char]
        cursor = leaf.end_char
    assert cursor == len(text)


@pytest.mark.django_db
@pytest.mark.parametrize("chunks", [[[0, 10]], [[0, 10], [12, len(TEXT)]], [[0, "x"]], [0, 1], []])
def test_stored_chunks_that_do_not_partition_the_text_count_as_none(tmp_path: Path, chunks: Any) -> None:
    document_id = plan_and_chunk(tmp_path)
    AgentState.objects.filter(document_id=document_id).update(chunks=chunks)
    status, answer = run("apply-tree", str(document_id), write(tmp_path, "tree.json", TREE))
    assert status == 1 and answer["details"]["next_step"] == "apply_chunks", answer
    assert f"Document {document_id} has no chunks yet: apply the chunks first" in answer["error"]
