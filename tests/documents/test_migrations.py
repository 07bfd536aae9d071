"""Data migrations run forwards on rows written by the schema before them (real PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("documents", "0017_job_counts")]
AFTER = [("documents", "0018_agent_state")]


@pytest.fixture
def executor(transactional_db: None) -> Iterator[MigrationExecutor]:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    try:
        yield executor
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)


def _apps_at(executor: MigrationExecutor, target: list[tuple[str, str]]) -> Any:
    executor.migrate(target)
    executor.loader.build_graph()
    return executor.loader.project_state(target).apps


def test_agent_state_moves_out_of_the_metadata(executor: MigrationExecutor) -> None:
    old = _apps_at(executor, BEFORE)
    collection = old.get_model("documents", "Collection").objects.create(name="c", slug="c")
    Document = old.get_model("documents", "Document")
    text = "# A\n\none.\n\n## B\n\ntwo.\n"
    cut = text.index("## B")
    tree = {"title": "A", "summary": "s", "sections": []}
    chunked = Document.objects.create(
        collection=collection,
        title="chunked",
        content=text,
        content_hash="h1",
        metadata={
            "source": "kept",
            "agent": {
                "chunks": [[0, cut], [cut, len(text)]],
                "markers": 1,
                "content_hash": "h1",
                "chunked": "2026-11-30T10:00:00+00:00",
                "tree": tree,
                "tree_saved": "2026-11-30T10:05:00+00:00",
            },
        },
        builder="agent",
    )
    stale = Document.objects.create(
        collection=collection,
        title="stale",
        content=text,
        content_hash="h2",
        metadata={"agent": {"chunks": [[0, len(text)]], "markers": 0, "content_hash": "other"}},
    )
    planned = Document.objects.create(collection=collection, title="planned", content=text, content_hash="h3")
    old.get_model("documents", "IngestionJob").objects.create(document=planned, builder_requested="agent")
    structural = Document.objects.create(
        collection=collection, title="structural", content=text, content_hash="h4", builder="structural"
    )

    new = _apps_at(executor, AFTER)
    states = {state.document_id: state for state in new.get_model("documents", "AgentState").objects.all()}
    assert set(states) == {chunked.pk, stale.pk, planned.pk}  # the structural one is not in the path
    assert states[chunked.pk].chunks == [[0, cut], [cut, len(text)]] and states[chunked.pk].markers == 1
    assert states[chunked.pk].tree == tree and states[chunked.pk].tree_saved is not None
    assert states[stale.pk].chunks == [] and states[planned.pk].chunks == []
    metadata = dict(new.get_model("documents", "Document").objects.values_list("pk", "metadata"))
    assert metadata == {chunked.pk: {"source": "kept"}, stale.pk: {}, planned.pk: {}, structural.pk: {}}
