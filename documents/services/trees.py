"""Writes to document trees: the atomic tree swap and the corpus version (the lexical index
is written with the tree: ``documents.services.search_index``).

Every write that changes what a query can find moves the corpus version in the same
transaction, so a cached query result never outlives the corpus it was computed on.
A node's own edits (title, summary, split, merge, move, group, dissolve, exclude) and undo are
in ``documents.services.nodes``; every edit is recorded through ``documents.services.history``.
"""

from __future__ import annotations

import numpy as np
from django.core.files.base import ContentFile
from django.db import connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from documents.ingestion.tree import LEAF
from documents.ingestion.tree_rows import FlatNodeRow
from documents.models import AgentState, CorpusVersion, Document, IngestionJob, Node, TreeEdit
from documents.services.background import embedding_send
from documents.services.collection_indexes import collection_index_ensure
from documents.services.extracting import ExtractedText
from documents.services.search_index import search_index_refresh
from openfable.token_counting import count_tokens

NODE_TITLE_MAX_CHARS = 500
# A summary is asked for in 1-3 sentences (about 80 words); this is ten times that, and keeps one
# node from filling the LLM's prompts, its embedding text and every export.
NODE_SUMMARY_MAX_CHARS = 4_000


class JobSuperseded(Exception):
    """The job a runner was computing is no longer its to finish: the stalled-job sweep failed it,
    or another runner claimed it since. The runner stops without saving (one build per document)."""


def corpus_version_bump() -> int:
    """Move the corpus version (call inside the transaction that changes the corpus)."""
    updated = CorpusVersion.objects.filter(pk=1).update(version=F("version") + 1)
    if not updated:
        CorpusVersion.objects.get_or_create(pk=1, defaults={"version": 1})
    return int(CorpusVersion.objects.values_list("version", flat=True).get(pk=1))


@transaction.atomic
def document_tree_replace(
    *,
    document: Document,
    rows: list[FlatNodeRow],
    vectors: np.ndarray,
    builder: str,
    embedding_model: str,
    job: IngestionJob | None = None,
    extracted: ExtractedText | None = None,
) -> list[Node]:
    """Swap the document's tree for the new one in one transaction.

    ``rows`` come from ``documents.ingestion.tree_rows.flatten_tree`` (pre-order, ``order`` =
    row index) and ``vectors`` hold one embedding per row. Queries see the old tree until the
    commit. The tree version moves, and the document's edit history goes with the old nodes
    (undo restores node ids that no longer exist). Returns the saved nodes in ``rows`` order.
    ``extracted``: the text (and page map) read from the document's file by this run, which the
    rows point into; saved with them, so the text and its tree never disagree.
    """
    if not Document.objects.select_for_update().filter(pk=document.pk).exists():
        raise Document.DoesNotExist(f"document {document.pk} was deleted")
    if job is not None and not _job_still_ours(job).exists():  # no tree written for nothing
        raise JobSuperseded(f"job {job.pk} was failed or claimed again while it ran")
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
                title=row.title[:NODE_TITLE_MAX_CHARS],
                summary=row.summary[:NODE_SUMMARY_MAX_CHARS],
                toc_path=row.toc_path,
                start_char=row.start_char,
                end_char=row.end_char,
                content=row.content,
                token_count=row.token_count,
                embedding=vectors[row.order],
                edited=row.edited,
                excluded=row.excluded,
            )
            for row in level
        ]
        Node.objects.bulk_create(nodes, batch_size=500)
        saved.update((row.order, node) for row, node in zip(level, nodes, strict=True))
    TreeEdit.objects.filter(document_id=document.pk).delete()
    if builder != Document.Builder.AGENT:
        # Another builder's tree takes the document out of the agent path: chunks and a tree
        # the agent made no longer describe what serves (services.agent refuses its steps).
        AgentState.objects.filter(document_id=document.pk).delete()
    text_fields: dict[str, object] = {}
    replaced_layer = ""
    if extracted is not None:
        replaced_layer = Document.objects.filter(pk=document.pk).values_list("text_layer", flat=True).get()
        text_fields = {
            "content": extracted.text,
            "page_spans": extracted.page_spans,
            "token_count": count_tokens(extracted.text),
            "recognised_pages": extracted.recognised_pages,
            "text_layer": _text_layer_save(document, extracted),
        }
    try:
        Document.objects.filter(pk=document.pk).update(
            status=Document.Status.INDEXED,
            builder=builder,
            embedding_model=embedding_model,
            tree_version=F("tree_version") + 1,
            updated=timezone.now(),
            **text_fields,
        )
        search_index_refresh([document.pk])  # after the token count: it is the document's length
        _job_finish(job, rows)
    except BaseException:
        if text_fields.get("text_layer"):  # this reading's file, for a tree never saved
            document.text_layer.storage.delete(str(text_fields["text_layer"]))
        raise
    if replaced_layer and replaced_layer != text_fields.get("text_layer"):
        # The previous reading's, once the new one is committed (a rollback keeps it serving).
        storage = document.text_layer.storage
        transaction.on_commit(lambda: storage.delete(replaced_layer))
    if extracted is not None:
        document.content, document.page_spans = extracted.text, extracted.page_spans
        document.recognised_pages = extracted.recognised_pages
    corpus_version_bump()
    # Once committed: the collection may now be large enough for its own HNSW index.
    collection_id = document.collection_id
    transaction.on_commit(lambda: collection_index_ensure(collection_id))
    return [saved[row.order] for row in rows]


def _job_finish(job: IngestionJob | None, rows: list[FlatNodeRow]) -> None:
    # The job's row is written (and locked) only now, at the end: until then the runner's
    # heartbeat keeps moving during the save (``jobs.job_run_now``). Swept or claimed again
    # meanwhile, it is no longer this runner's, and the whole swap rolls back.
    if job is not None and not _job_still_ours(job).update(
        status=IngestionJob.Status.SUCCEEDED,
        stage=IngestionJob.Stage.DONE,
        progress=100,
        node_count=len(rows),
        chunk_count=sum(1 for row in rows if row.kind == LEAF),
        error="",
        finished=timezone.now(),
    ):
        raise JobSuperseded(f"job {job.pk} was failed or claimed again while its tree was saved")


def _text_layer_save(document: Document, extracted: ExtractedText) -> str:
    """Store the PDF of the pages read by OCR (``Document.text_layer``); its name, "" for none."""
    if not extracted.text_layer:
        document.text_layer = ""
        return ""
    document.text_layer.save("recognised.pdf", ContentFile(extracted.text_layer), save=False)
    return document.text_layer.name or ""


def _job_still_ours(job: IngestionJob) -> QuerySet[IngestionJob]:
    """The job, if it is still running under the claim this runner made (its ``started``).

    Its document row is locked before it, as everywhere a job and its document change together
    (``jobs.job_claim``, ``jobs.job_fail``, the sweep), so two writers never wait on each other
    in opposite orders.

    A job never claimed (``started`` empty: a caller that made it with ``queue=False`` and writes
    the tree itself, as import and the latency benchmark do) is still ours while it is queued
    and unclaimed; once a worker claims it, the caller's tree is the superseded one."""
    if job.started is None:
        return IngestionJob.objects.filter(pk=job.pk, status=IngestionJob.Status.QUEUED, started__isnull=True)
    return IngestionJob.objects.filter(pk=job.pk, status=IngestionJob.Status.RUNNING, started=job.started)


def queue_embedding(node_ids: list[int]) -> None:
    """Re-embed these nodes in the background once the transaction commits."""
    ids = sorted(node_ids)
    transaction.on_commit(lambda: embedding_send(node_ids=ids))
