"""`openfable index | plan | apply-chunks | apply-tree | reembed` (also `manage.py openfable ...`).

`index` adds files (PDF, Word, HTML, Markdown, text) through ``document_create`` and, with
``--wait``, runs their ingestion in this process. `plan`, `apply-chunks` and `apply-tree` are the agent path
(documents/services/agent.py): an outside agent reads the document itself, names the chunk
boundaries and the tree, and this command validates and saves them. `reembed` switches the
embedding model or size (documents/services/reembed.py). Handlers only parse arguments, call
the services and shape the JSON answer; every error a user can fix is a ``UserInputError``,
printed as {"error": ...} by the dispatcher.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from django.db import transaction

from documents.agent_answers import (
    chunks_summary,
    plan_instructions,
    plan_summary,
    tree_instructions,
    tree_summary,
)
from documents.models import Document, IngestionJob
from documents.presenters import document_present, job_present
from documents.selectors import as_id, document_get
from documents.services.agent import (
    AgentStep,
    agent_apply_chunks,
    agent_apply_tree,
    agent_plan,
    agent_step_worded,
    parse_markers_file,
)
from documents.services.document_input import clean_tags, document_input_clean
from documents.services.documents import DocumentCreateResult, document_create
from documents.services.jobs import job_run_now
from documents.services.reembed import DEFAULT_BATCH_SIZE, Progress, nodes_reembed
from openfable.embeddings import get_embedder
from openfable.errors import UserInputError

STDIN = "-"


def register(subparsers: Any) -> None:
    index = subparsers.add_parser(
        "index",
        help="add PDF, Word (.docx), HTML, Markdown or text files to a collection and index them",
        description="Store each file (the same file again in a collection: the same document) and queue "
        "its ingestion for the worker `make run` starts; with --wait, index here and print the result. "
        "The format is read from each file's content, not its name.",
    )
    index.add_argument(
        "paths",
        metavar="PATH",
        nargs="+",
        help=".pdf, .docx, .html, .md or UTF-8 .txt files, or - for standard input",
    )
    index.add_argument(
        "--collection", metavar="SLUG", default="", help="collection slug or id (default: default)"
    )
    index.add_argument("--tags", default="", help="comma-separated tags, e.g. a,b")
    index.add_argument(
        "--wait", action="store_true", help="index in this process and print the indexed documents"
    )
    index.set_defaults(handler=handle_index)

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


def handle_index(options: dict[str, Any]) -> dict[str, Any]:
    paths: list[str] = options["paths"]
    if paths.count(STDIN) > 1:
        raise UserInputError("Standard input (-) can be read only once; give it at most once.")
    tags = clean_tags(options["tags"])
    # Read every file, then store them all or none: a bad third file stores nothing.
    contents = [(path, _read_input(path, what="document")) for path in paths]
    results: list[tuple[str, DocumentCreateResult]] = []
    try:
        with transaction.atomic():
            for path, data in contents:
                results.append((path, _create(path, data, options, tags)))
    except BaseException:
        # Storage has no transactions: the originals already written for the rolled-back
        # documents go with them.
        for _, created in results:
            if created.created and created.document.original:
                created.document.original.delete(save=False)
        raise
    documents = []
    for position, (path, created) in enumerate(results, start=1):
        entry = document_present(created.document) | {"path": path, "created": created.created}
        if options["wait"] and created.job is not None:
            where = f"[{position}/{len(results)}] {path}"
            _say(f"{where}: indexing ({created.document.token_count} tokens)")
            run = job_run_now(document_id=created.document.pk, on_progress=_progress_line(where))
            if run is not None:
                entry |= document_present(document_get(user=None, pk=created.document.pk))
                entry["job"] = job_present(run.job)
                _say(f"{where}: {run.job.status}, {entry['node_count']} nodes")
        elif created.job is not None:
            entry["job"] = job_present(created.job)
        documents.append(entry)
    answer: dict[str, Any] = {"documents": documents}
    if not options["wait"] and any(entry.get("job") for entry in documents):
        answer["note"] = "Queued: the worker that `make run` starts indexes them. Use --wait to index here."
    return answer


def _create(path: str, data: bytes, options: dict[str, Any], tags: list[str]) -> DocumentCreateResult:
    try:
        return document_create(
            collection=options["collection"] or None,
            content=data,
            source_filename="" if path == STDIN else Path(path).name,
            tags=tags,
            queue=not options["wait"],
        )
    except UserInputError as error:
        raise UserInputError(f"{path}: {error}", code=error.code) from None


def _say(message: str) -> None:
    # Progress goes to stderr: stdout carries exactly one JSON object.
    print(message, file=sys.stderr, flush=True)


def _progress_line(where: str) -> Callable[[IngestionJob], None]:
    """A line on stderr for each step the job records: the step in words (pages read, passages
    embedded, as the corpus page says it), its percent, and the time left once it is measured."""

    def report(job: IngestionJob) -> None:
        step = job_present(job)["step"]
        left = f", {step['time_left']}" if step["time_left"] else ""
        _say(f"{where}: {step['words']} ({job.progress}%{left})")

    return report


# How each step of the agent path is run from here; services.agent names the step, not the command.
_AGENT_NEXT = {
    AgentStep.PLAN: "openfable plan PATH --collection SLUG",
    AgentStep.APPLY_CHUNKS: "openfable apply-chunks {id} markers.json",
    AgentStep.APPLY_TREE: "openfable apply-tree {id} tree.json",
}
_MARKERS_FILE = (
    'Either JSON {"markers": ["opening words of chunk", ...]} matching markers_schema, or plain '
    "text with one marker per line. Use - instead of a file name to pass it on standard input."
)


def _agent_next(step: AgentStep, document_id: int | None) -> str:
    return _AGENT_NEXT[step].format(id=document_id)


def _agent_step() -> AbstractContextManager[None]:
    """A refused step of the agent path, with its next step said as a command."""
    return agent_step_worded(lambda step, document_id: f"Next: `{_agent_next(step, document_id)}`.")


def handle_plan(options: dict[str, Any]) -> dict[str, Any]:
    path: str = options["path"]
    data = _read_input(path, what="document")
    name = "" if path == STDIN else Path(path).name
    if document_input_clean(content=data, source_filename=name).file is not None:
        # The agent reads and cuts the text itself: a PDF, Word or HTML file has none until the
        # worker extracts it.
        raise UserInputError(
            f"{path}: plan takes a text or Markdown file; index a PDF, Word or HTML file with "
            "`openfable index` (its text, headings and pages are read for you)."
        )
    result = agent_plan(
        collection=options["collection"] or None,
        content=data,
        title=options["title"],
        source_filename=name,
        tags=clean_tags(options["tags"]),
    )
    document = result.document
    answer = plan_summary(document=document, created=result.created)
    answer["instructions"] = plan_instructions() | {
        "markers_file": _MARKERS_FILE,
        "next": _agent_next(AgentStep.APPLY_CHUNKS, document.pk),
    }
    return answer


def handle_apply_chunks(options: dict[str, Any]) -> dict[str, Any]:
    document = _document(options["document_id"])
    text = _decode(_read_input(options["file"], what="markers"), what="markers")
    with _agent_step():
        markers = parse_markers_file(text, document_id=document.pk)
        spans = agent_apply_chunks(document=document, markers=markers)
    answer = chunks_summary(document=document, markers=markers, spans=spans)
    return answer | {
        "instructions": tree_instructions(len(spans))
        | {"next": _agent_next(AgentStep.APPLY_TREE, document.pk)}
    }


def handle_apply_tree(options: dict[str, Any]) -> dict[str, Any]:
    document = _document(options["document_id"])
    text = _decode(_read_input(options["file"], what="tree"), what="tree")
    with _agent_step():
        job = agent_apply_tree(document=document, data=text)
    return tree_summary(document=document, job=job)


def handle_reembed(options: dict[str, Any]) -> dict[str, Any]:
    from django.conf import settings

    expected = options.get("dimensions")
    if expected is not None and expected != settings.EMBEDDING_DIMENSIONS:
        raise UserInputError(
            f"--dimensions {expected} does not match OPENFABLE_EMBEDDING_DIMENSIONS="
            f"{settings.EMBEDDING_DIMENSIONS}. Set OPENFABLE_EMBEDDING_DIMENSIONS={expected} (and a model "
            "that makes vectors of that size) and run reembed again."
        )
    try:
        embedder = get_embedder()
    except ValueError as error:  # a configuration the embedder refuses to build
        raise UserInputError(str(error)) from None
    result = nodes_reembed(embedder=embedder, batch_size=options["batch_size"], progress=_progress_printer())
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
        raise UserInputError(
            f"There is no {what} file {path!r}. Give the path of a UTF-8 text file, or - for standard input."
        ) from None
    except IsADirectoryError:
        raise UserInputError(f"{path!r} is a folder; give the path of a {what} file.") from None
    except OSError as error:
        raise UserInputError(f"Cannot read the {what} file {path!r}: {error.strerror}.") from None


def _decode(data: bytes, *, what: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UserInputError(
            f"The {what} file is not UTF-8 text (invalid byte at position {error.start}); save it as UTF-8."
        ) from None


def _document(raw_id: str) -> Document:
    if as_id(raw_id) is None:
        raise UserInputError(f"{raw_id!r} is not a document id; use the number `openfable plan` printed.")
    try:
        return document_get(user=None, pk=raw_id)
    except UserInputError:
        raise UserInputError(
            f"There is no document {raw_id}. Use the number `openfable plan` printed, or run "
            "`openfable plan PATH` to store one and get its id.",
            code="not_found",
        ) from None


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
