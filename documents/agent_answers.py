"""What the agent path answers and tells the agent (reads and shapes only; the writes are in
``documents.services.agent``): each step's summary, the numbered chunks with their opening words,
the saved tree in outline, and the instructions for the next step. Every surface (the CLI, MCP)
answers with these and adds how to run the next step in its own terms."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from documents.ingestion.tree_schema import MARKERS_JSON_SCHEMA, TREE_JSON_SCHEMA, Span
from documents.models import AgentState, Document, IngestionJob, Node
from openfable.token_counting import count_tokens

OPENING_WORDS = 12
# Same sizes the LLM chunker is asked for (ingestion/prompts.py), so both paths make alike chunks.
TARGET_CHUNK_WORDS = 150
MARKER_WORDS = "5-8"


def agent_chunks(document: Document) -> list[Span] | None:
    """The chunks stored by ``agent_apply_chunks``; None when there are none (or they are stale)."""
    raw = AgentState.objects.filter(document_id=document.pk).values_list("chunks", flat=True).first()
    try:
        spans = [(int(start), int(end)) for start, end in raw or []]
    except (TypeError, ValueError):
        return None
    # Used only if they still partition the text (a row written by hand, a text read again).
    ends = [0] + [end for _, end in spans]
    partitions = all(start == ends[index] <= end for index, (start, end) in enumerate(spans))
    return spans if spans and partitions and ends[-1] == len(document.content) else None


def plan_summary(*, document: Document, created: bool) -> dict[str, Any]:
    """What `plan` answers about the stored document (every surface words its own next step)."""
    answer: dict[str, Any] = {
        "document_id": document.pk,
        "created": created,
        "title": document.title,
        "collection": document.collection.slug,
        "characters": len(document.content),
        "tokens": document.token_count,
        "status": document.status,
    }
    if not created:
        # The same text was planned (or uploaded) before: say what it already has.
        chunks = agent_chunks(document)
        answer["builder"] = document.builder
        answer["agent_chunks"] = len(chunks) if chunks else 0
    return answer


def chunks_summary(*, document: Document, markers: Sequence[str], spans: Sequence[Span]) -> dict[str, Any]:
    """What `apply-chunks` answers: the numbered chunks (every surface words its own next step)."""
    return {
        "document_id": document.pk,
        "markers": len(markers),
        "chunk_count": len(spans),
        "chunks": chunk_listing(document, spans),
    }


def chunk_listing(document: Document, spans: Sequence[Span]) -> list[dict[str, Any]]:
    """What the agent sees of each chunk: index, offsets, tokens and its opening words."""
    listing = []
    for index, (start, end) in enumerate(spans):
        piece = document.content[start:end]
        words = piece.split()
        opening = " ".join(words[:OPENING_WORDS]) + (" \u2026" if len(words) > OPENING_WORDS else "")
        listing.append(
            {
                "index": index,
                "start_char": start,
                "end_char": end,
                "tokens": count_tokens(piece),
                "opening": opening,
            }
        )
    return listing


def tree_summary(*, document: Document, job: IngestionJob) -> dict[str, Any]:
    """What `apply-tree` answers: the saved tree in outline (every surface the same)."""
    nodes = Node.objects.filter(document=document)
    return {
        "document_id": document.pk,
        "job_id": job.pk,
        "status": document.status,
        "builder": document.builder,
        "embedding_model": document.embedding_model,
        "nodes": nodes.count(),
        "leaves": nodes.filter(kind=Node.Kind.LEAF).count(),
        "sections": tree_outline(document),
    }


def tree_outline(document: Document) -> list[dict[str, Any]]:
    """The saved sections (and their subsections) with titles, offsets and leaf counts."""
    nodes: list[dict[str, Any]] = [
        dict(values)
        for values in Node.objects.filter(document=document)
        .order_by("order")
        .values("id", "parent_id", "kind", "title", "start_char", "end_char")
    ]
    children: dict[int | None, list[dict[str, Any]]] = {}
    for node in nodes:
        children.setdefault(node["parent_id"], []).append(node)

    def leaf_count(node_id: int) -> int:
        return sum(
            1 if child["kind"] == Node.Kind.LEAF else leaf_count(child["id"])
            for child in children.get(node_id, [])
        )

    def describe(node: dict[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "title": node["title"],
            "start_char": node["start_char"],
            "end_char": node["end_char"],
            "leaves": leaf_count(node["id"]),
        }
        inner = [child for child in children.get(node["id"], []) if child["kind"] != Node.Kind.LEAF]
        if inner:
            entry["sections"] = [describe(child) for child in inner]
        return entry

    roots = children.get(None, [])
    if not roots:
        return []
    return [describe(child) for child in children.get(roots[0]["id"], []) if child["kind"] != Node.Kind.LEAF]


def plan_instructions() -> dict[str, Any]:
    """What the agent does after `plan`; each surface adds how to send the markers ("next")."""
    return {
        "task": (
            "Read the document yourself and split it into chunks at discourse boundaries (headings, "
            f"numbered clauses, paragraphs, topic shifts), each one coherent unit of about "
            f"{TARGET_CHUNK_WORDS} words (between {TARGET_CHUNK_WORDS // 2} and {TARGET_CHUNK_WORDS * 2}); "
            "a heading starts the chunk it introduces."
        ),
        "marker": (
            f"A marker is the opening words of one chunk ({MARKER_WORDS} words), copied exactly as they "
            "appear: same spelling, capitalisation, punctuation and numbering; no paraphrase, no "
            "ellipsis. Markers are searched forward in document order, each after the previous one, so "
            "a phrase that repeats resolves to its next occurrence. The text before the first marker "
            "is chunk 0; a marker at the very start of the text simply starts chunk 0."
        ),
        "markers_schema": MARKERS_JSON_SCHEMA,
    }


def tree_instructions(chunk_count: int) -> dict[str, Any]:
    """What the agent does after `apply-chunks`; each surface adds how to send the tree ("next")."""
    return {
        "task": (
            "Build the document's table of contents as a tree over the chunk indexes above: sections "
            'list their own chunks in "chunks" (the text before their first subsection) and their '
            'subsections in "sections".'
        ),
        "rules": [
            f"Every chunk index from 0 to {chunk_count - 1} appears exactly once, in increasing order "
            "when the tree is read depth-first, so each section covers a contiguous run of chunks.",
            "At most 3 levels of sections below the root; every section holds at least one chunk or "
            "subsection; aim for 2 to 10 children per section and follow the document's own headings.",
            "Titles are short table-of-contents entries (at most 10 words, keep heading numbers).",
            "Summaries are 1-3 sentences describing everything beneath the node, naming its key terms. "
            "The root's title and summary describe the whole document.",
        ],
        "tree_schema": TREE_JSON_SCHEMA,
    }
