"""One ingestion run: build the tree (LLM, structural or agent), embed every node, save it.

Called by the Celery task (``documents.tasks.ingest_document``) and by the agent CLI. The
new tree replaces the old one in a single transaction at the very end, so queries keep
seeing the old tree while a document is re-indexed, and a failure leaves it in place.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from decimal import Decimal

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from documents.ingestion.pipeline import NodeRow, apply_edits, edit_key, flatten_tree
from documents.ingestion.structural import build_structural_tree
from documents.ingestion.tree import TreeNode
from documents.models import Document, IngestionJob, Node
from documents.services import corpus_version_bump, document_terms_refresh
from openfable.embeddings import Embedder, EmbeddingDimensionError, get_embedder
from openfable.tokens import count_tokens

logger = logging.getLogger(__name__)

# Share of the progress bar given to each stage.
_PROGRESS = {"chunking": (5, 25), "building_tree": (25, 50), "embedding": (50, 95), "saving": (95, 99)}
_EMBED_GROUP = 128  # texts per progress update while embedding


class IndexingError(Exception):
    """A failure a person must act on (the message goes on the job and the page)."""


def job_progress(job: IngestionJob, stage: str, fraction: float = 0.0) -> None:
    low, high = _PROGRESS.get(stage, (0, 100))
    percent = int(low + (high - low) * max(0.0, min(1.0, fraction)))
    IngestionJob.objects.filter(pk=job.pk).update(stage=stage, progress=percent)
    job.stage, job.progress = stage, percent


def claim_job(*, document_id: int) -> IngestionJob | None:
    """The newest unfinished job of the document, marked running; None when there is nothing to do."""
    with transaction.atomic():
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
        job.started = timezone.now()
        job.error = ""
        job.save(update_fields=["status", "started", "error"])
        Document.objects.filter(pk=document_id).update(status=Document.Status.INDEXING)
    return job


def document_index(
    *, job: IngestionJob, embedder: Embedder | None = None, tree: TreeNode | None = None
) -> None:
    """Run the whole pipeline for ``job``; raise on failure (the caller records it).

    ``tree`` is given by the agent path (already validated); otherwise the builder is the
    one the job asked for, or the LLM when one is configured, else the structural one.
    """
    document = job.document
    embedder = embedder or get_embedder()
    check_embedding_dimensions(embedder)
    # The structural builder embeds blocks of the text that are often exactly a leaf's text:
    # those leaves reuse the vectors instead of going through the model again.
    embedder = MemoEmbedder(embedder)
    timings: dict[str, float] = {}
    text = document.content

    started = time.perf_counter()
    builder: str
    if tree is not None:
        builder = Document.Builder.AGENT
    else:
        tree, builder = _build_tree(job=job, text=text, title=document.title, embedder=embedder)
    timings["build"] = round(time.perf_counter() - started, 3)

    edits = _current_edits(document)
    edited = apply_edits(tree, text=text, edits=edits) if edits else frozenset()
    rows = flatten_tree(
        tree, text=text, document_title=document.title, count_tokens=count_tokens, edited=edited
    )

    started = time.perf_counter()
    vectors = _embed_rows(rows, embedder=embedder, on_progress=lambda f: job_progress(job, "embedding", f))
    timings["embed"] = round(time.perf_counter() - started, 3)

    job_progress(job, "saving")
    started = time.perf_counter()
    document_tree_replace(
        document=document,
        rows=rows,
        vectors=vectors,
        builder=builder,
        embedding_model=embedder.model_name,
        job=job,
    )
    timings["save"] = round(time.perf_counter() - started, 3)
    IngestionJob.objects.filter(pk=job.pk).update(timings={**job.timings, **timings})


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

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(text for text in texts if text not in self.memo))
        if missing:
            vectors = np.asarray(self.inner.embed_passages(missing), dtype=np.float32)
            if vectors.shape != (len(missing), self.dimensions):
                raise EmbeddingDimensionError(
                    f"expected {len(missing)} vectors of {self.dimensions}, got {vectors.shape}"
                )
            self.memo.update(zip(missing, vectors, strict=True))
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([self.memo[text] for text in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


def job_fail(*, job: IngestionJob, error: str) -> None:
    """Record a failure: the old tree (if any) stays and keeps serving queries."""
    with transaction.atomic():
        IngestionJob.objects.filter(pk=job.pk).update(
            status=IngestionJob.Status.FAILED, error=error[:10_000], finished=timezone.now()
        )
        Document.objects.filter(pk=job.document_id).update(status=Document.Status.FAILED)


def check_embedding_dimensions(embedder: Embedder) -> None:
    """Refuse before any write when the model's vectors do not fit the stored column."""
    from openfable.checks import stored_embedding_dimensions

    stored = stored_embedding_dimensions(connection.alias)
    if stored is not None and embedder.dimensions != stored:
        raise EmbeddingDimensionError(
            f"The embedding model {embedder.model_name!r} makes {embedder.dimensions}-dimensional vectors "
            f"but the database stores {stored}. Set OPENFABLE_EMBEDDING_DIMENSIONS={stored} with a matching "
            "model, or run `python manage.py openfable reembed` to switch every node to the new model."
        )


def _build_tree(*, job: IngestionJob, text: str, title: str, embedder: Embedder) -> tuple[TreeNode, str]:
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
    tree = build_structural_tree(text, embed=embedder.embed_passages, count_tokens=count_tokens)
    job_progress(job, "building_tree", 1.0)
    return tree, Document.Builder.STRUCTURAL


def _build_with_llm(*, job: IngestionJob, text: str, title: str) -> TreeNode | None:
    from documents.ingestion.llm_builder import LLMBuilder, LLMBuildFailed
    from openfable.llm import LLMClient, LLMRequest

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


def _current_edits(document: Document) -> dict[str, tuple[str, str]]:
    edited = Node.objects.filter(document=document, edited=True).only(
        "kind", "start_char", "end_char", "title", "summary"
    )
    text = document.content
    return {
        edit_key(node.kind, text[node.start_char : node.end_char]): (node.title, node.summary)
        for node in edited
    }


def _embed_rows(
    rows: list[NodeRow], *, embedder: Embedder, on_progress: Callable[[float], None]
) -> np.ndarray:
    texts = [row.embed_text for row in rows]
    parts: list[np.ndarray] = []
    for start in range(0, len(texts), _EMBED_GROUP):
        on_progress(start / max(1, len(texts)))
        parts.append(embedder.embed_passages(texts[start : start + _EMBED_GROUP]))
    on_progress(1.0)
    vectors = np.vstack(parts) if parts else np.zeros((0, embedder.dimensions), dtype=np.float32)
    if vectors.shape != (len(rows), embedder.dimensions):
        raise EmbeddingDimensionError(
            f"expected {len(rows)} vectors of {embedder.dimensions}, got {vectors.shape}"
        )
    return vectors


@transaction.atomic
def document_tree_replace(
    *,
    document: Document,
    rows: list[NodeRow],
    vectors: np.ndarray,
    builder: str,
    embedding_model: str,
    job: IngestionJob | None = None,
) -> list[Node]:
    """Swap the document's tree for the new one in one transaction."""
    with connection.cursor() as cursor:
        # One statement instead of Django's cascade collector walking the parent links.
        cursor.execute("DELETE FROM documents_node WHERE document_id = %s", [document.pk])
    saved: dict[int, Node] = {}
    for depth in sorted({row.depth for row in rows}):
        level = [row for row in rows if row.depth == depth]
        nodes = [
            Node(
                document=document,
                parent=saved[row.parent_order] if row.parent_order is not None else None,
                kind=row.kind,
                depth=row.depth,
                ordinal=row.ordinal,
                order=row.order,
                title=row.title[:500],
                summary=row.summary,
                toc_path=row.toc_path,
                start_char=row.start_char,
                end_char=row.end_char,
                content=row.content,
                token_count=row.token_count,
                embedding=vectors[row.order],
                edited=row.edited,
            )
            for row in level
        ]
        Node.objects.bulk_create(nodes, batch_size=500)
        saved.update((row.order, node) for row, node in zip(level, nodes, strict=True))
    document_terms_refresh([document.pk])
    Document.objects.filter(pk=document.pk).update(
        status=Document.Status.INDEXED,
        builder=builder,
        embedding_model=embedding_model,
        updated=timezone.now(),
    )
    if job is not None:
        IngestionJob.objects.filter(pk=job.pk).update(
            status=IngestionJob.Status.SUCCEEDED,
            stage=IngestionJob.Stage.DONE,
            progress=100,
            node_count=len(rows),
            chunk_count=sum(1 for row in rows if row.kind == "leaf"),
            error="",
            finished=timezone.now(),
        )
    corpus_version_bump()
    return [saved[row.order] for row in rows]
