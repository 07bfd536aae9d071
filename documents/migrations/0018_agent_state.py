"""The agent path's working state moves out of ``Document.metadata["agent"]`` into ``AgentState``.

The user's metadata is replaced whole by every edit (REST PATCH, the admin), which dropped the
chunks between ``apply-chunks`` and ``apply-tree``. Each document in the agent path gets a row:
one with ``metadata["agent"]``, one built by the agent, or one planned and not yet built (an
unfinished job asking for the agent builder). The key leaves the metadata.
"""

from __future__ import annotations

from typing import Any

import django.db.models.deletion
from django.db import migrations, models
from django.utils.dateparse import parse_datetime

KEY = "agent"


def _moment(value: object) -> Any:
    return parse_datetime(value) if isinstance(value, str) else None


def _chunks(state: dict[str, Any], document: Any) -> list[list[int]]:
    # Only chunks cut from the text the document holds now, as the old reader checked.
    raw = state.get("chunks")
    if state.get("content_hash") != document.content_hash or not isinstance(raw, list):
        return []
    if not all(
        isinstance(item, list) and len(item) == 2 and all(type(n) is int for n in item) for item in raw
    ):
        return []
    return [[start, end] for start, end in raw]


def forwards(apps: Any, schema_editor: Any) -> None:
    Document = apps.get_model("documents", "Document")
    AgentState = apps.get_model("documents", "AgentState")
    in_path = (
        models.Q(metadata__has_key=KEY)
        | models.Q(builder="agent")
        | models.Q(builder="", jobs__builder_requested="agent", jobs__status__in=["queued", "running"])
    )
    for document in Document.objects.filter(in_path).distinct().iterator():
        metadata = dict(document.metadata or {})
        state = metadata.pop(KEY, None)
        state = state if isinstance(state, dict) else {}
        chunks = _chunks(state, document)
        AgentState.objects.update_or_create(
            document_id=document.pk,
            defaults={
                "chunks": chunks,
                "markers": state.get("markers") if chunks and type(state.get("markers")) is int else 0,
                "chunked": _moment(state.get("chunked")) if chunks else None,
                "tree": state.get("tree") if isinstance(state.get("tree"), dict) else None,
                "tree_saved": _moment(state.get("tree_saved")),
            },
        )
        Document.objects.filter(pk=document.pk).update(metadata=metadata)


def backwards(apps: Any, schema_editor: Any) -> None:
    Document = apps.get_model("documents", "Document")
    AgentState = apps.get_model("documents", "AgentState")
    for state in AgentState.objects.select_related("document").iterator():
        document = state.document
        if not state.chunks and state.tree is None:
            continue
        metadata = dict(document.metadata or {})
        metadata[KEY] = {
            "chunks": state.chunks,
            "markers": state.markers,
            "content_hash": document.content_hash,
            "chunked": state.chunked.isoformat() if state.chunked else None,
            "tree": state.tree,
            "tree_saved": state.tree_saved.isoformat() if state.tree_saved else None,
        }
        Document.objects.filter(pk=document.pk).update(metadata=metadata)


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0017_job_counts"),
    ]

    operations = [
        migrations.CreateModel(
            name="AgentState",
            fields=[
                (
                    "document",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="agent_state",
                        serialize=False,
                        to="documents.document",
                    ),
                ),
                ("chunks", models.JSONField(blank=True, default=list)),
                (
                    "markers",
                    models.PositiveIntegerField(default=0, help_text="markers the chunks were cut at"),
                ),
                ("chunked", models.DateTimeField(blank=True, null=True)),
                ("tree", models.JSONField(blank=True, null=True)),
                ("tree_saved", models.DateTimeField(blank=True, null=True)),
                ("created", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.RunPython(forwards, backwards),
    ]
