"""Ingestion jobs: claim one, run it (build the tree, embed every node, save it), record progress or failure.
(Sending jobs, failing them and the worker's sweep are ``documents.services.job_queue``.)

``job_run_now`` is the one sequence every runner shares: the Celery task, the agent path, the
``openfable index --wait`` command and the benchmarks. The new tree replaces the old one in a
single transaction at the very end, so queries keep seeing the old tree while a document is
re-indexed, and a failure leaves it in place.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from documents.ingestion.structural import build_structural_tree
from documents.ingestion.tree import TreeNode
from documents.ingestion.tree_rows import FlatNodeRow, NodeEdit, apply_edits, edit_key, flatten_tree
from documents.models import Document, IngestionJob, Node
from documents.progress_words import STAGE_BANDS
from documents.services.extracting import ExtractedText, document_extract, document_needs_extraction
from documents.services.job_queue import job_fail
from documents.services.trees import JobSuperseded, document_tree_replace
from openfable.embeddings import (
    Embedder,
    EmbeddingDimensionError,
    check_vectors,
    dimensions_mismatch,
    get_embedder,
)
from openfable.errors import OpenFableError
from openfable.token_counting import count_tokens

logger = logging.getLogger(__name__)

# Share of the progress bar given to each stage (the corpus page reads a stage's share back).
_PROGRESS = STAGE_BANDS
# Texts per progress update while embedding: 16 texts of a leaf or a summary take 2-3 s on two
# cores (128 took 15 s and more).
_EMBED_GROUP = 16
# Reports closer together than this in the same stage are not written (a fast remote embedder
# would otherwise write the job row dozens of times a second).
_PROGRESS_MIN_SECONDS = 1.0
_last_written: dict[int, float] = {}
# Who watches a job run in this process (``job_run_now(on_progress=...)``): told each recorded step.
_watchers: dict[int, Callable[[IngestionJob], None]] = {}
# How often the save's heartbeat thread writes (``_heartbeat_meanwhile``).
_SAVE_HEARTBEAT_SECONDS = 2.0


def job_progress(
    job: IngestionJob, stage: str, fraction: float = 0.0, *, done: int = 0, total: int = 0
) -> None:
    """Record the stage and its progress, and the heartbeat the stalled-job sweep reads.

    ``done`` of ``total``: the stage's items (pages read, passages embedded) when it counts
    them; a new stage also records when it began (the corpus page's time left is measured
    from it).

    Stops the run (``JobSuperseded``) when the job is no longer this runner's: the sweep failed
    it, or another runner claimed it since (its ``started`` moved); ``Document.DoesNotExist``
    when the document was deleted meanwhile. Either way nothing of this run gets saved."""
    low, high = _PROGRESS.get(stage, (0, 100))
    percent = int(low + (high - low) * max(0.0, min(1.0, fraction)))
    now = time.monotonic()
    if stage == job.stage and now - _last_written.get(job.pk, 0.0) < _PROGRESS_MIN_SECONDS:
        return
    mine = IngestionJob.objects.filter(pk=job.pk, status=IngestionJob.Status.RUNNING, started=job.started)
    moment = timezone.now()
    stage_started = job.stage_started if stage == job.stage and job.stage_started else moment
    fields = {"stage_done": done, "stage_total": total, "stage_started": stage_started}
    if not mine.update(stage=stage, progress=percent, heartbeat=moment, **fields):
        _last_written.pop(job.pk, None)
        if not IngestionJob.objects.filter(pk=job.pk).exists():
            raise Document.DoesNotExist(f"document {job.document_id} was deleted with its jobs")
        raise JobSuperseded(f"job {job.pk} was failed or claimed again while it ran")
    _last_written[job.pk] = now
    job.stage, job.progress = stage, percent
    job.stage_done, job.stage_total, job.stage_started = done, total, stage_started
    watcher = _watchers.get(job.pk)
    if watcher is not None:
        watcher(job)


def job_claim(*, document_id: int, worker: str = "") -> IngestionJob | None:
    """The newest unfinished job of the document, marked running; None when there is nothing to do.

    ``worker`` ("host:pid") names the process running it, so that a worker starting on the same
    host can tell a job whose process died (``jobs_requeue_orphans``)."""
    with transaction.atomic():
        # The document row first: the order every writer of a job and its document keeps (a
        # claim of a job whose tree is being saved waits for the save, then finds it done).
        if not Document.objects.select_for_update().filter(pk=document_id).exists():
            return None
        job = (
            IngestionJob.objects.select_for_update()
            .select_related("document")
            .filter(
                document_id=document_id, status__in=[IngestionJob.Status.QUEUED, IngestionJob.Status.RUNNING]
            )
            .order_by("-created", "-id")
            .first()
        )
        if job is None:
            return None
        job.status = IngestionJob.Status.RUNNING
        job.started = job.heartbeat = timezone.now()
        job.error = ""
        job.worker = worker
        # A run starts its stages afresh (a retried job still shows where the last run stopped).
        job.stage_started = None
        job.save(update_fields=["status", "started", "heartbeat", "error", "worker", "stage_started"])
        Document.objects.filter(pk=document_id).update(status=Document.Status.INDEXING)
    return job


@dataclass(frozen=True)
class JobRun:
    """What ``job_run_now`` did: the job as it ended, and the error when it failed."""

    job: IngestionJob
    error: Exception | None = None

    @property
    def succeeded(self) -> bool:
        return self.job.status == IngestionJob.Status.SUCCEEDED


def job_run_now(
    *,
    document_id: int,
    embedder: Embedder | None = None,
    tree: TreeNode | None = None,
    retryable: tuple[type[Exception], ...] = (),
    claimed: IngestionJob | None = None,
    worker: str = "",
    on_progress: Callable[[IngestionJob], None] | None = None,
) -> JobRun | None:
    """Claim the document's newest unfinished job and run it in this process.

    The one sequence every runner shares (the Celery task, the agent path, ``openfable index
    --wait``, the benchmarks). A failure is recorded on the job (status failed, its message
    shown to the user, the previous tree untouched) and returned in ``JobRun.error``, except
    the errors in ``retryable``: those propagate with the job left claimable, so the caller
    (Celery's retry) can run it again. None when there is nothing to run: no unfinished job,
    or the document was deleted meanwhile (logged, not an error). ``claimed``: a job the
    caller already claimed (the agent path claims its own before it runs). ``on_progress``: told
    the job after each step it records (its stage, percent and counts), as often as the job row is
    written (``job_progress``), e.g. for a command's progress lines.
    """
    job = claimed or job_claim(document_id=document_id, worker=worker)
    if job is None:
        logger.info("document %s: no unfinished ingestion job (deleted or already done)", document_id)
        return None
    if on_progress is not None:
        _watchers[job.pk] = on_progress
    try:
        document_index(job=job, embedder=embedder, tree=tree)
    except Document.DoesNotExist:
        logger.info("document %s was deleted while it was being indexed; nothing saved", document_id)
        return None
    except JobSuperseded as superseded:
        logger.warning("document %s: %s; this run stops without saving", document_id, superseded)
        return None
    except retryable:
        raise
    except Exception as error:
        if not isinstance(error, OpenFableError):
            logger.exception("document %s: ingestion failed", document_id)
        job_fail(job=job, error=error_text(error))
        return _ended(job, error)
    finally:
        _last_written.pop(job.pk, None)
        _watchers.pop(job.pk, None)
    return _ended(job, None)


def _ended(job: IngestionJob, error: Exception | None) -> JobRun | None:
    """The run as the job row tells it now; None when the document was deleted right after."""
    try:
        job.refresh_from_db()
    except IngestionJob.DoesNotExist:
        logger.info("document %s was deleted as its indexing ended", job.document_id)
        return None
    return JobRun(job=job, error=error)


def error_text(error: BaseException) -> str:
    """How a failure reads on the job: one of ours as its message, anything else with its type."""
    return str(error) if isinstance(error, OpenFableError) else f"{type(error).__name__}: {error}"


def document_index(
    *, job: IngestionJob, embedder: Embedder | None = None, tree: TreeNode | None = None
) -> None:
    """Run the whole pipeline for ``job``; raise on failure (the caller records it).

    ``tree`` is given by the agent path (already validated); otherwise the builder is the
    one the job asked for, or the LLM when one is configured, else the structural one.
    """
    document = job.document
    embedder = embedder or get_embedder()
    require_embedder_fits_stored_vectors(embedder)
    # The structural builder embeds blocks of the text that are often exactly a leaf's text:
    # those leaves reuse the vectors instead of going through the model again.
    embedder = MemoEmbedder(embedder)
    timings: dict[str, float] = {}
    text = document.content
    extracted: ExtractedText | None = None
    if tree is None and document_needs_extraction(document):
        # A PDF, Word or HTML file is read again on every run (a retry, a re-index): its text
        # is saved only with the new tree, so a failure here leaves the previous one serving.
        job_progress(job, "extracting")
        started = time.perf_counter()
        extracted = document_extract(
            document=document,
            on_progress=lambda done, total: job_progress(
                job, "extracting", done / max(1, total), done=done, total=total
            ),
            on_recognise=lambda done, total: job_progress(
                job, "recognising", done / max(1, total), done=done, total=total
            ),
        )
        text = extracted.text
        timings["extract"] = round(time.perf_counter() - started, 3)

    started = time.perf_counter()
    builder: str
    if tree is not None:
        builder = Document.Builder.AGENT
    else:
        tree, builder = _build_tree(
            job=job,
            text=text,
            title=document.title,
            embedder=embedder,
            font_heading_starts=extracted.font_heading_starts if extracted else frozenset(),
        )
    timings["build"] = round(time.perf_counter() - started, 3)
    if builder == Document.Builder.STRUCTURAL and re.search(r"[^\W\d_]", document.title):
        # The root reads as the document is called (every toc path already starts with it); the
        # structural builder's guess ("Up to 2,445,223 Shares") only stands in for a title
        # without words. An LLM or an agent titled the root on purpose: theirs stays.
        tree.title = document.title

    edits = _current_edits(document)
    edited = apply_edits(tree, text=text, edits=edits) if edits else frozenset()
    rows = flatten_tree(
        tree, text=text, document_title=document.title, count_tokens=count_tokens, edited=edited
    )

    started = time.perf_counter()
    vectors = _embed_rows(
        rows,
        embedder=embedder,
        on_progress=lambda done, total: job_progress(
            job, "embedding", done / max(1, total), done=done, total=total
        ),
    )
    timings["embed"] = round(time.perf_counter() - started, 3)

    job_progress(job, "saving")
    started = time.perf_counter()
    with _heartbeat_meanwhile(job):
        document_tree_replace(
            document=document,
            rows=rows,
            vectors=vectors,
            builder=builder,
            embedding_model=embedder.model_name,
            job=job,
            extracted=extracted,
        )
    timings["save"] = round(time.perf_counter() - started, 3)
    IngestionJob.objects.filter(pk=job.pk).update(
        timings={**job.timings, **timings},
        document_tokens=count_tokens(text),
        embedded_tokens=embedder.tokens_sent,
    )


@contextmanager
def _heartbeat_meanwhile(job: IngestionJob) -> Iterator[None]:
    """Keep the job's heartbeat moving from a connection of its own during a step that cannot
    report from inside its transaction (the tree swap: seconds to minutes for a 5 MB document).

    Not inside an outer transaction (a test's): the job row would be locked by it, or invisible."""
    if connection.in_atomic_block:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(_SAVE_HEARTBEAT_SECONDS):
                IngestionJob.objects.filter(
                    pk=job.pk, status=IngestionJob.Status.RUNNING, started=job.started
                ).update(heartbeat=timezone.now())
        except DatabaseError:
            logger.warning("job %s: a heartbeat during the save failed", job.pk, exc_info=True)
        finally:
            connection.close()  # this thread's own

    beating = threading.Thread(target=beat, name=f"heartbeat-job-{job.pk}", daemon=True)
    beating.start()
    try:
        yield
    finally:
        stop.set()
        beating.join(timeout=30)


class MemoEmbedder:
    """An embedder that embeds each distinct passage once and remembers its vector.

    One lives for one ingestion run (never shared, so it holds one document's texts at most).
    It is keyed by the exact text handed to the model (the model adds its own passage prefix to
    it, the same for every call), so a remembered vector is the one a fresh call would return.
    Queries are not remembered.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dimensions = inner.dimensions
        self.memo: dict[str, np.ndarray] = {}
        self.tokens_sent = 0  # what the model was handed, in the app's token count

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(text for text in texts if text not in self.memo))
        if missing:
            self.tokens_sent += sum(count_tokens(text) for text in missing)
            vectors = check_vectors(
                self.inner.embed_passages(missing),
                count=len(missing),
                dimensions=self.dimensions,
                model_name=self.model_name,
            )
            self.memo.update(zip(missing, vectors, strict=True))
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([self.memo[text] for text in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


def require_embedder_fits_stored_vectors(embedder: Embedder) -> None:
    """Refuse before any write when the model's vectors do not fit the stored column."""
    from openfable.checks import stored_embedding_dimensions

    problem = dimensions_mismatch(
        configured=embedder.dimensions,
        stored=stored_embedding_dimensions(connection.alias),
        model_name=embedder.model_name,
    )
    if problem:
        raise EmbeddingDimensionError(problem)


def _build_tree(
    *, job: IngestionJob, text: str, title: str, embedder: Embedder, font_heading_starts: frozenset[int]
) -> tuple[TreeNode, str]:
    from openfable.llm import llm_configured

    wanted = job.builder_requested or (
        Document.Builder.LLM if llm_configured() else Document.Builder.STRUCTURAL
    )
    if wanted == Document.Builder.LLM:
        if not llm_configured():
            _note_fallback(job, "an LLM build was asked for but OPENFABLE_LLM_MODEL is not set")
        else:
            tree = _build_with_llm(job=job, text=text, title=title)
            if tree is not None:
                return tree, Document.Builder.LLM
    job_progress(job, "chunking")
    tree = build_structural_tree(
        text,
        embed=embedder.embed_passages,
        count_tokens=count_tokens,
        on_progress=lambda stage, fraction: job_progress(job, stage, fraction),
        font_heading_starts=font_heading_starts,
    )
    job_progress(job, "building_tree", 1.0)
    return tree, Document.Builder.STRUCTURAL


def _build_with_llm(*, job: IngestionJob, text: str, title: str) -> TreeNode | None:
    from documents.ingestion.llm_builder import LLMBuilder, LLMBuildFailed
    from openfable.llm import Fallback, LLMClient, LLMRequest, count_fallback

    builder = LLMBuilder(
        LLMClient.from_settings(),
        request_factory=LLMRequest,
        validation_retries=settings.LLM_TREE_RETRIES,
        progress=lambda stage, fraction: job_progress(job, stage, fraction),
    )
    try:
        result = builder.build(text, title=title)
        tree: TreeNode | None = result.root
        job.chunk_count = len(result.chunks)
    except LLMBuildFailed as failure:
        count_fallback(Fallback.TREE_STRUCTURAL)
        _note_fallback(job, str(failure))
        tree = None
    usage = builder.usage
    IngestionJob.objects.filter(pk=job.pk).update(
        llm_calls=usage.calls,
        llm_cached_calls=usage.cached_calls,
        llm_prompt_tokens=usage.prompt_tokens,
        llm_completion_tokens=usage.completion_tokens,
        llm_cost_usd=Decimal(str(round(usage.cost_usd, 6))),
    )
    return tree


def _note_fallback(job: IngestionJob, reason: str) -> None:
    message = f"Fell back to the structural builder: {reason}"
    logger.warning("document %s: %s", job.document_id, message)
    IngestionJob.objects.filter(pk=job.pk).update(fallback_reason=message[:10_000])
    job.fallback_reason = message


def _current_edits(document: Document) -> dict[str, NodeEdit]:
    """What a person set on the current tree (titles, summaries, exclusions), keyed by kind and text."""
    nodes = Node.objects.filter(Q(edited=True) | Q(excluded=True), document=document).only(
        "kind", "start_char", "end_char", "title", "summary", "edited", "excluded"
    )
    text = document.content
    return {
        edit_key(node.kind, text[node.start_char : node.end_char]): NodeEdit(
            node.title, node.summary, node.edited, node.excluded
        )
        for node in nodes
    }


def _embed_rows(
    rows: list[FlatNodeRow], *, embedder: Embedder, on_progress: Callable[[int, int], None]
) -> np.ndarray:
    texts = [row.embed_text for row in rows]
    parts: list[np.ndarray] = []
    for start in range(0, len(texts), _EMBED_GROUP):
        on_progress(start, len(texts))
        parts.append(embedder.embed_passages(texts[start : start + _EMBED_GROUP]))
    on_progress(len(texts), len(texts))
    vectors = np.vstack(parts) if parts else np.zeros((0, embedder.dimensions), dtype=np.float32)
    return check_vectors(
        vectors, count=len(rows), dimensions=embedder.dimensions, model_name=embedder.model_name
    )
