"""The agent path: an outside agent reads the document itself and names its chunks and its tree.

Three steps, driven by ``openfable plan | apply-chunks | apply-tree`` (cli/) or the MCP tools
``plan_document | apply_chunks | apply_tree``:

1. plan (``agent_plan``): the document is stored (``document_create``, builder "agent", nothing
   queued), or found when its text is already there, and put in the agent path: it gets an
   ``AgentState``; the agent is told what a boundary marker is;
2. apply-chunks: the agent's markers are found in the text (``locate_markers``) and cut into exact
   spans (``chunk_spans``), kept in its ``AgentState`` until the tree comes;
3. apply-tree: the agent's JSON tree over those chunk indexes is validated exactly as an LLM's is
   (``tree_from_json``) and saved with embeddings through ``documents.services.jobs``.

Each step replaces the result of its previous run, never appends to it. A document another
builder made (or re-made) has no ``AgentState``: its steps are refused until it is planned.

Every refusal is an ``AgentStepError`` in the domain's words ("apply the chunks first") naming
the step to run next (``next_step``); each surface adds how to run it in its own terms (a
command, a tool call). Errors from below (a marker not found, a tree that does not validate, the
embedder down) are turned into those here, once for every surface.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

from django.db import transaction
from django.utils import timezone

from documents.agent_answers import agent_chunks
from documents.ingestion.boundaries import MarkerNotFoundError, chunk_spans, locate_markers
from documents.ingestion.tree_schema import (
    MarkerAnswerError,
    Span,
    TreeValidationError,
    parse_marker_answer,
    tree_from_json,
    tree_to_json,
)
from documents.models import AgentState, Collection, Document, IngestionJob
from documents.services.documents import DocumentCreateResult, document_create
from documents.services.jobs import job_claim, job_run_now
from openfable.embeddings import Embedder, EmbeddingError
from openfable.errors import ConflictError, NotFoundError, ServiceUnavailableError, UserInputError


class AgentStep(StrEnum):
    """The agent path's steps, by the names the MCP tools and ``details.next_step`` use."""

    PLAN = "plan"
    APPLY_CHUNKS = "apply_chunks"
    APPLY_TREE = "apply_tree"


class AgentStepError(UserInputError):
    """A step of the agent path cannot run as asked.

    The message says what was wrong and what to do in the domain's words; ``next_step`` is the
    step that does it (``details`` carries it for programs), which each surface words as its own
    command or call (``with_next``).
    """

    def __init__(
        self,
        message: str,
        *,
        document_id: int | None,
        next_step: AgentStep,
        code: str | None = None,
        details: dict[str, Any] | None = None,
    ):
        super().__init__(
            message,
            code=code,
            details={**(details or {}), "document_id": document_id, "next_step": next_step.value},
        )
        self.document_id = document_id
        self.next_step = next_step

    def with_next(self, words: str) -> AgentStepError:
        """The same error with the surface's own words for the next step after the message."""
        return type(self)(
            f"{self} {words}",
            document_id=self.document_id,
            next_step=self.next_step,
            code=self.code,
            details=self.details,
        )


@contextmanager
def agent_step_worded(next_step: Callable[[AgentStep, int | None], str]) -> Iterator[None]:
    """Run an agent step; a refusal comes out with the surface's own words for the next step
    (``next_step(step, document_id)``: a command on the CLI, a tool call on MCP)."""
    try:
        yield
    except AgentStepError as error:
        raise error.with_next(next_step(error.next_step, error.document_id)) from None


class AgentConflictError(AgentStepError, ConflictError):
    """The step is valid but the document is not in a state that allows it now (409)."""


class NotInAgentPathError(AgentConflictError):
    """The document is not in the agent path (another builder made it, or it was never planned)."""

    code = "not_in_agent_path"


# -- markers --------------------------------------------------------------------------------------


def parse_markers_file(text: str, *, document_id: int | None = None) -> list[str]:
    """Markers from a file: JSON ``{"markers": [...]}`` (or a bare JSON list), or one per line.

    Anything that starts like JSON is read as JSON, so a broken JSON file is reported as broken
    JSON rather than taken as a list of odd markers. A line file whose first line merely starts
    with "[" (e.g. "[1] Scope") is still read line by line.
    """
    stripped = text.strip()
    if not stripped:
        raise AgentStepError(
            'The markers file is empty. Give the opening words of each chunk: JSON {"markers": [...]} '
            "or one marker per line.",
            document_id=document_id,
            next_step=AgentStep.APPLY_CHUNKS,
        )
    if stripped.startswith(("{", "```")) or (stripped.startswith("[") and _is_json(stripped)):
        try:
            return parse_marker_answer(stripped)
        except MarkerAnswerError as error:
            raise AgentStepError(
                str(error), document_id=document_id, next_step=AgentStep.APPLY_CHUNKS, code=error.code
            ) from None
    return [line.strip() for line in stripped.splitlines() if line.strip()]


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


# -- step 1: plan ---------------------------------------------------------------------------------


@transaction.atomic
def agent_plan(
    *,
    collection: Collection | str | int | None,
    content: str | bytes,
    title: str = "",
    source_filename: str = "",
    tags: Iterable[str] | None = None,
    user: Any = None,
) -> DocumentCreateResult:
    """Store the text for an outside agent to chunk (nothing queued) and put it in the agent path.

    The same text already in the collection is that document, handed to the agent: its tree
    keeps serving queries until the agent's replaces it.
    """
    result = document_create(
        collection=collection,
        content=content,
        title=title,
        source_filename=source_filename,
        tags=tags,
        builder=Document.Builder.AGENT,
        queue=False,
        user=user,
    )
    AgentState.objects.get_or_create(document=result.document)
    return result


def _state_locked(document: Document) -> AgentState:
    """The document's agent state, locked; refused when the document is not in the agent path."""
    state = AgentState.objects.select_for_update().filter(document_id=document.pk).first()
    if state is None:
        raise _not_in_agent_path(document)
    return state


def _not_in_agent_path(document: Document) -> NotInAgentPathError:
    made_by = (
        f"its tree was built by the {document.builder} builder" if document.builder else "it was not planned"
    )
    return NotInAgentPathError(
        f"Document {document.pk} is not in the agent path: {made_by}. Plan its text first (the "
        "same text in the same collection is this document); its tree keeps serving queries until "
        "the agent's replaces it.",
        document_id=document.pk,
        next_step=AgentStep.PLAN,
    )


# -- step 2: chunks -------------------------------------------------------------------------------


@transaction.atomic
def agent_apply_chunks(*, document: Document, markers: Sequence[str]) -> list[Span]:
    """Cut the document at the markers and keep the chunks for ``agent_apply_tree``.

    Raises ``NotInAgentPathError`` or ``AgentStepError`` (a marker not found: it names the
    marker and the offset searched from). Replaces chunks from an earlier run and drops the tree
    built over them: its chunk indexes refer to the old chunks. The saved node tree keeps
    serving queries until ``agent_apply_tree`` replaces it.
    """
    state = _state_locked(document)
    if not markers:
        raise AgentStepError(
            "There are no markers; give the opening words of at least one chunk.",
            document_id=document.pk,
            next_step=AgentStep.APPLY_CHUNKS,
        )
    text = document.content
    try:
        spans = chunk_spans(text, locate_markers(text, markers))
    except MarkerNotFoundError as error:
        raise AgentStepError(
            f"{error}. Fix that marker and apply the markers again.",
            document_id=document.pk,
            next_step=AgentStep.APPLY_CHUNKS,
            code=error.code,
        ) from None
    state.chunks = [[start, end] for start, end in spans]
    state.markers = len(markers)
    state.chunked = timezone.now()
    state.tree = None
    state.tree_saved = None
    state.save()
    return spans


# -- step 3: tree ---------------------------------------------------------------------------------


def agent_apply_tree(*, document: Document, data: object, embedder: Embedder | None = None) -> IngestionJob:
    """Validate the agent's tree (object or JSON text) over the stored chunks and save it.

    Synchronous: the nodes are embedded with the configured embedder and the document's tree is
    replaced in one transaction (``document_index``), so running it again replaces, never appends.
    Raises ``NotInAgentPathError``, ``AgentStepError`` (no chunks yet; what is wrong with the
    tree), ``AgentConflictError`` (a build is running) or ``ServiceUnavailableError`` (the
    embedder failed); a failure is recorded on the job and the old tree stays.
    """
    if not AgentState.objects.filter(document_id=document.pk).exists():
        raise _not_in_agent_path(document)
    chunks = agent_chunks(document)
    if chunks is None:
        raise AgentStepError(
            f"Document {document.pk} has no chunks yet: apply the chunks first (the opening words of "
            "each chunk), then build the tree over the chunk indexes they are numbered with.",
            document_id=document.pk,
            next_step=AgentStep.APPLY_CHUNKS,
        )
    try:
        tree = tree_from_json(data, text=document.content, chunks=chunks)
    except TreeValidationError as error:
        raise AgentStepError(
            f"{error}. Fix the tree and apply it again.",
            document_id=document.pk,
            next_step=AgentStep.APPLY_TREE,
            code=error.code,
        ) from None
    job = _claimed_agent_job(document)
    run = job_run_now(document_id=document.pk, embedder=embedder, tree=tree, claimed=job)
    if run is None:
        raise NotFoundError(f"Document {document.pk} was deleted meanwhile; nothing was saved.")
    if isinstance(run.error, EmbeddingError) and not isinstance(run.error, UserInputError):
        # The embedding service failed (an outage, a wrong URL): the old tree stays; say why.
        raise ServiceUnavailableError(
            f"The tree is valid but embedding it failed: {run.error}. Nothing was replaced; apply "
            "the tree again later."
        ) from None
    if run.error is not None:
        raise run.error  # a UserInputError (e.g. a model of the wrong size) says what to set
    _remember_tree(document, tree_json=_tree_json_or_none(tree, chunks))
    document.refresh_from_db()
    return run.job


def _claimed_agent_job(document: Document) -> IngestionJob:
    with transaction.atomic():
        # Reuse the job `plan` queued (nothing runs it): one job per apply-tree, none left dangling.
        # claim_job takes the newest unfinished job, so ours must be the newest one.
        pending = (
            IngestionJob.objects.select_for_update()
            .filter(document=document, status__in=[IngestionJob.Status.QUEUED, IngestionJob.Status.RUNNING])
            .order_by("-created", "-id")
            .first()
        )
        if pending is not None and pending.status == IngestionJob.Status.RUNNING:
            # One build per document at a time (job_one_unfinished_per_document).
            raise AgentConflictError(
                f"Document {document.pk} is being indexed now (job {pending.pk}); wait until it "
                "finishes and apply the tree again.",
                document_id=document.pk,
                next_step=AgentStep.APPLY_TREE,
            )
        if pending is None:
            pending = IngestionJob.objects.create(
                document=document, builder_requested=Document.Builder.AGENT, reindex=document.nodes.exists()
            )
        elif pending.builder_requested != Document.Builder.AGENT:
            # A job waiting in the queue becomes this one (its worker then finds nothing to run).
            pending.builder_requested = Document.Builder.AGENT
            pending.save(update_fields=["builder_requested"])
    job = job_claim(document_id=document.pk)
    if job is None or job.pk != pending.pk:
        # Another ingestion of this document was started at the same moment; do not race it.
        raise AgentConflictError(
            f"Another ingestion of document {document.pk} started meanwhile; wait for it and apply "
            "the tree again.",
            document_id=document.pk,
            next_step=AgentStep.APPLY_TREE,
        )
    return job


def _tree_json_or_none(tree: Any, chunks: Sequence[Span]) -> dict[str, Any] | None:
    try:
        return tree_to_json(tree, chunks)
    except ValueError:
        # The depth cap can leave chunks after a subsection, which the JSON shape cannot say.
        return None


def _remember_tree(document: Document, *, tree_json: dict[str, Any] | None) -> None:
    AgentState.objects.filter(document_id=document.pk).update(tree=tree_json, tree_saved=timezone.now())
