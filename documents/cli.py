"""`manage.py openfable plan | apply-chunks | apply-tree | reembed` (also the `openfable` script).

The first three are the agent path (documents/agent.py): an outside agent reads the document
itself, names the chunk boundaries and the tree, and this command validates and saves them.
`reembed` switches the embedding model or size (documents/reembed.py). Handlers only parse
arguments, call those modules and shape the JSON answer.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from documents.agent import (
    AgentInputError,
    agent_apply_chunks,
    agent_apply_tree,
    agent_chunks,
    chunk_listing,
    parse_markers_file,
    plan_instructions,
    tree_instructions,
    tree_outline,
)
from documents.ingestion.boundaries import MarkerNotFoundError
from documents.ingestion.tree_schema import TreeValidationError
from documents.models import Document, Node
from documents.reembed import DEFAULT_BATCH_SIZE, Progress, ReembedError, nodes_reembed
from documents.services import DocumentInputError, collection_get_or_create_default, document_create
from openfable.embeddings import EmbeddingError, get_embedder
from openfable.management.commands.openfable import CommandInputError

STDIN = "-"


def register(subparsers: Any) -> None:
    plan = subparsers.add_parser(
        "plan",
        help="store a document for an outside agent to chunk; prints its id and the instructions",
        description="Store a UTF-8 text or Markdown document (same text again: the same document) and "
        "print what the agent does next.",
    )
    plan.add_argument("path", metavar="PATH", help="a UTF-8 .txt or .md file, or - for standard input")
    plan.add_argument("--collection", metavar="SLUG", default="", help="collection slug (default: default)")
    plan.add_argument("--title", default="", help="title (default: from the file name or first line)")
    plan.add_argument("--tags", default="", help="comma-separated tags, e.g. a,b")
    plan.set_defaults(handler=handle_plan)

    chunks = subparsers.add_parser(
        "apply-chunks",
        help="cut the document at the agent's boundary markers; prints the numbered chunks",
        description='Markers file: JSON {"markers": [...]} or one marker per line. Replaces earlier chunks.',
    )
    chunks.add_argument("document_id", metavar="ID", help="document id printed by plan")
    chunks.add_argument("file", metavar="FILE", help="markers file, or - for standard input")
    chunks.set_defaults(handler=handle_apply_chunks)

    tree = subparsers.add_parser(
        "apply-tree",
        help="validate the agent's tree over the chunks, embed it and save it (replaces the tree)",
        description="Tree file: JSON matching the tree_schema printed by apply-chunks.",
    )
    tree.add_argument("document_id", metavar="ID", help="document id printed by plan")
    tree.add_argument("file", metavar="FILE", help="tree JSON file, or - for standard input")
    tree.set_defaults(handler=handle_apply_tree)

    reembed = subparsers.add_parser(
        "reembed",
        help="re-embed every node with the configured model, resizing the vector column if needed",
        description="Run after changing OPENFABLE_EMBEDDING_URL / _MODEL / _DIMENSIONS.",
    )
    reembed.add_argument(
        "--dimensions",
        type=int,
        metavar="N",
        help="the size you expect the vectors to have; refuses when the configuration says otherwise",
    )
    reembed.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"nodes embedded and written per step (default {DEFAULT_BATCH_SIZE})",
    )
    reembed.set_defaults(handler=handle_reembed)


# -- handlers -------------------------------------------------------------------------------------


def handle_plan(options: dict[str, Any]) -> dict[str, Any]:
    path: str = options["path"]
    data = _read_input(path, what="document")
    collection = options["collection"] or collection_get_or_create_default()
    tags = [tag.strip() for tag in options["tags"].split(",") if tag.strip()]
    try:
        result = document_create(
            collection=collection,
            content=data,
            title=options["title"],
            source_filename="" if path == STDIN else Path(path).name,
            tags=tags,
            builder=Document.Builder.AGENT,
            queue=False,
        )
    except DocumentInputError as error:
        raise CommandInputError(str(error)) from None
    document = result.document
    answer: dict[str, Any] = {
        "document_id": document.pk,
        "created": result.created,
        "title": document.title,
        "collection": document.collection.slug,
        "characters": len(document.content),
        "tokens": document.token_count,
        "status": document.status,
    }
    if not result.created:
        # The same text was planned (or uploaded) before: say what it already has.
        chunks = agent_chunks(document)
        answer["builder"] = document.builder
        answer["agent_chunks"] = len(chunks) if chunks else 0
    answer["instructions"] = plan_instructions(document.pk)
    return answer


def handle_apply_chunks(options: dict[str, Any]) -> dict[str, Any]:
    document = _document(options["document_id"])
    text = _decode(_read_input(options["file"], what="markers"), what="markers")
    try:
        markers = parse_markers_file(text)
        spans = agent_apply_chunks(document=document, markers=markers)
    except MarkerNotFoundError as error:
        raise CommandInputError(f"{error}. Fix that marker and run apply-chunks again.") from None
    except AgentInputError as error:
        raise CommandInputError(str(error)) from None
    return {
        "document_id": document.pk,
        "markers": len(markers),
        "chunk_count": len(spans),
        "chunks": chunk_listing(document, spans),
        "instructions": tree_instructions(document.pk, len(spans)),
    }


def handle_apply_tree(options: dict[str, Any]) -> dict[str, Any]:
    document = _document(options["document_id"])
    text = _decode(_read_input(options["file"], what="tree"), what="tree")
    try:
        job = agent_apply_tree(document=document, data=text)
    except TreeValidationError as error:
        raise CommandInputError(f"{error}. Fix the tree and run apply-tree again.") from None
    except AgentInputError as error:
        raise CommandInputError(str(error)) from None
    except EmbeddingError as error:
        raise CommandInputError(str(error)) from None
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


def handle_reembed(options: dict[str, Any]) -> dict[str, Any]:
    from django.conf import settings

    expected = options.get("dimensions")
    if expected is not None and expected != settings.EMBEDDING_DIMENSIONS:
        raise CommandInputError(
            f"--dimensions {expected} does not match OPENFABLE_EMBEDDING_DIMENSIONS="
            f"{settings.EMBEDDING_DIMENSIONS}. Set OPENFABLE_EMBEDDING_DIMENSIONS={expected} (and a model "
            "that makes vectors of that size) and run reembed again."
        )
    try:
        embedder = get_embedder()
        result = nodes_reembed(
            embedder=embedder, batch_size=options["batch_size"], progress=_progress_printer()
        )
    except (ReembedError, EmbeddingError, ValueError) as error:
        raise CommandInputError(str(error)) from None
    return {
        "nodes": result.nodes,
        "documents": result.documents,
        "old_dimensions": result.old_dimensions,
        "new_dimensions": result.new_dimensions,
        "column_changed": result.column_changed,
        "model": result.model,
        "seconds": result.seconds,
    }


# -- helpers --------------------------------------------------------------------------------------


def _read_input(path: str, *, what: str) -> bytes:
    if path == STDIN:
        stream = getattr(sys.stdin, "buffer", None)
        return stream.read() if stream is not None else sys.stdin.read().encode("utf-8")
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise CommandInputError(
            f"There is no {what} file {path!r}. Give the path of a UTF-8 text file, or - for standard input."
        ) from None
    except IsADirectoryError:
        raise CommandInputError(f"{path!r} is a folder; give the path of a {what} file.") from None
    except OSError as error:
        raise CommandInputError(f"Cannot read the {what} file {path!r}: {error.strerror}.") from None


def _decode(data: bytes, *, what: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise CommandInputError(
            f"The {what} file is not UTF-8 text (invalid byte at position {error.start}); save it as UTF-8."
        ) from None


def _document(raw_id: str) -> Document:
    try:
        document_id = int(raw_id)
    except ValueError:
        raise CommandInputError(
            f"{raw_id!r} is not a document id; use the number `openfable plan` printed."
        ) from None
    document = Document.objects.filter(pk=document_id).first()
    if document is None:
        raise CommandInputError(
            f"There is no document {document_id}. Run `openfable plan PATH` to store one and get its id."
        )
    return document


def _progress_printer() -> Progress | None:
    # Progress goes to a terminal only: stdout carries exactly one JSON object, and scripts
    # reading stderr should not get a line per batch.
    if not sys.stderr.isatty():
        return None

    def report(done: int, total: int) -> None:
        sys.stderr.write(f"\rre-embedded {done}/{total} nodes")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return report
