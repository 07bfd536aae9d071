"""`python -m fable_benchmarks bench-ingest`: index datasets with the structural builder and time it.

Reads DragonBall-format JSONL (see ``datasets``) and indexes every document synchronously in
this process, through the same services as any other runner (``document_create`` then
``job_run_now``, exactly what the Celery task runs), into a throw-away collection, deleted
afterwards unless kept. In the same run it embeds the same node texts with the same model, as the
baseline the pipeline is compared with: overhead = pipeline time / bare embedding time. Each
document's baseline is timed right after its pipeline (interleaved, so that load changing during a
long run weighs on both sides alike). The baseline goes straight to the model, every text from
scratch: it does not share the pipeline's memo (see ``documents.services.jobs.MemoEmbedder``), so
vectors the pipeline reused from the builder are embedded again here.
"""

from __future__ import annotations

import resource
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from documents.ingestion.tree_rows import embedding_text
from documents.models import Collection, Document, IngestionJob
from documents.progress_words import progress_words
from documents.selectors import document_nodes
from documents.services.collections import collection_create, collection_delete
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from fable_benchmarks.datasets import DatasetDocument, read_documents, read_file_documents
from openfable.embeddings import Embedder, get_embedder

Log = Callable[[str], None]
STAGES = ("extract", "build", "embed", "save")  # the job's own timings, summed over the documents
# The time left is judged once a step has run this long (issue: it must not swing by more than
# a factor of 2 from then on); before it, the rate rests on too few items to hold a person to.
ESTIMATE_SETTLED_SECONDS = 10.0


@dataclass
class EstimateWatch:
    """The time left a person sees while a job runs (the words of ``documents.progress_words``,
    as the corpus page and the API compute them), read at every progress write of the job:
    ``(stage, seconds into it, seconds left)``."""

    samples: list[tuple[str, float, float]] = field(default_factory=list)

    def __call__(self, job: IngestionJob) -> None:
        now = timezone.now()
        words = progress_words(
            status="running",
            stage=job.stage,
            percent=job.progress,
            done=job.stage_done,
            total=job.stage_total,
            stage_started=job.stage_started,
            ahead=0,
            now=now,
        )
        if words.seconds_left is not None and job.stage_started is not None:
            elapsed = (now - job.stage_started).total_seconds()
            self.samples.append((job.stage, elapsed, words.seconds_left))


def estimate_swing(samples: Iterable[tuple[str, float, float]]) -> float:
    """The largest factor between two estimates of one step's whole length (seconds into it plus
    seconds left) made once it had run ``ESTIMATE_SETTLED_SECONDS``: 1.0 when every estimate of
    every step agreed, or none ran that long."""
    lengths: dict[str, list[float]] = defaultdict(list)
    for stage, elapsed, left in samples:
        if elapsed >= ESTIMATE_SETTLED_SECONDS:
            lengths[stage].append(elapsed + left)
    return max((max(seen) / min(seen) for seen in lengths.values()), default=1.0)


@dataclass(frozen=True)
class IndexedDocument:
    """One dataset document after ``index_dataset_document``."""

    document: Document
    created: bool  # False: the same text was already in the collection (nothing was run)
    error: Exception | None = None
    timings: dict[str, float] | None = None  # the job's seconds per stage, when it ran
    document_tokens: int = 0  # the job's count of the document's tokens
    embedded_tokens: int = 0  # and of the tokens it sent to the embedding model
    estimate_swing: float = 1.0  # see ``estimate_swing``


def index_dataset_document(
    *, collection: Collection, item: DatasetDocument, embedder: Embedder
) -> IndexedDocument:
    """Store one dataset document (its ``doc_id`` in the metadata) and index it in this process
    with the structural builder; a failure is recorded on its job and returned, never raised.

    A document with a ``file`` is uploaded as its bytes, as every surface uploads one: the job
    then reads its text (extraction in a child process, as in the worker) before building."""
    created = document_create(
        collection=collection,
        content=item.file.read_bytes() if item.file is not None else item.content,
        source_filename=item.file.name if item.file is not None else "",
        title=item.title,
        metadata={"doc_id": item.doc_id},
        builder=Document.Builder.STRUCTURAL,
        queue=False,
    )
    if not created.created:
        return IndexedDocument(document=created.document, created=False)
    watch = EstimateWatch()
    run = job_run_now(document_id=created.document.pk, embedder=embedder, on_progress=watch)
    if run is None:  # nothing to run: cannot happen for a document made just now
        return IndexedDocument(document=created.document, created=True, error=LookupError("no job"))
    timings = {stage: float(run.job.timings.get(stage, 0.0)) for stage in STAGES}
    return IndexedDocument(
        document=created.document,
        created=True,
        error=run.error,
        timings=timings,
        document_tokens=run.job.document_tokens,
        embedded_tokens=run.job.embedded_tokens,
        estimate_swing=estimate_swing(watch.samples),
    )


@dataclass
class IngestBenchRow:
    dataset: str
    documents: int
    failed: int
    nodes: int
    pipeline_s: float
    extract_s: float  # reading the uploaded files (0 for text)
    pages: int  # of the uploaded files
    build_s: float
    embed_s: float
    save_s: float
    baseline_embed_s: float
    peak_rss_mb: float
    document_tokens: int = 0
    embedded_tokens: int = 0
    # One embedding pass over the document's tokens: its passages (which partition its text),
    # each embedded once, the least any tree over that text costs the model.
    one_pass_s: float = 0.0
    # The worst swing of the time-left estimate over the documents (``estimate_swing``).
    estimate_swing: float = 1.0

    @property
    def docs_per_minute(self) -> float:
        return 60 * self.documents / self.pipeline_s if self.pipeline_s else 0.0

    @property
    def nodes_per_second(self) -> float:
        return self.nodes / self.pipeline_s if self.pipeline_s else 0.0

    @property
    def embed_share(self) -> float:
        return self.embed_s / self.pipeline_s if self.pipeline_s else 0.0

    @property
    def overhead(self) -> float:
        return self.pipeline_s / self.baseline_embed_s if self.baseline_embed_s else 0.0

    @property
    def job_per_one_pass(self) -> float:
        return self.pipeline_s / self.one_pass_s if self.one_pass_s else 0.0

    @property
    def embedded_per_document_token(self) -> float:
        return self.embedded_tokens / self.document_tokens if self.document_tokens else 0.0

    def derived(self) -> dict[str, float]:
        """The rates, rounded as the table and the JSON show them."""
        return {
            "embedded_per_document_token": round(self.embedded_per_document_token, 2),
            "docs_per_minute": round(self.docs_per_minute, 1),
            "nodes_per_second": round(self.nodes_per_second, 1),
            "embed_share": round(self.embed_share, 3),
            "overhead": round(self.overhead, 3),
            "job_per_one_pass": round(self.job_per_one_pass, 3),
        }

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), **self.derived()}


def bench_ingest(
    path: Path, *, limit: int = 0, keep: bool = False, files: bool = False, log: Log | None = None
) -> IngestBenchRow:
    """``path`` is a documents JSONL, or with ``files`` a files list (``{"doc_id", "file"}``):
    each file is then uploaded as it is and the pipeline's time includes reading it."""
    say: Log = log or (lambda message: None)
    items = (
        read_file_documents(path, titles=_titles_beside(path), limit=limit)
        if files
        else read_documents(path, limit)
    )
    collection = collection_create(name=f"bench {path.stem} {uuid.uuid4().hex[:6]}")
    embedder = get_embedder()
    embedder.embed_passages(["warm up the model"])  # load time is not ingestion time
    documents = failed = nodes = pages = document_tokens = embedded_tokens = 0
    stage_totals = dict.fromkeys(STAGES, 0.0)
    pipeline_s = baseline_s = one_pass_s = 0.0
    swing = 1.0
    try:
        for item in items:
            started = time.perf_counter()
            indexed = index_dataset_document(collection=collection, item=item, embedder=embedder)
            if not indexed.created:
                say(f"skipped {item.doc_id}: the same text as a document already indexed")
                continue
            pipeline_s += time.perf_counter() - started
            documents += 1
            if indexed.error is not None:  # counted and shown, the run goes on
                failed += 1
                say(f"FAILED {item.doc_id}: {indexed.error}")
            for stage, seconds in (indexed.timings or {}).items():
                stage_totals[stage] += seconds
            document_tokens += indexed.document_tokens
            swing = max(swing, indexed.estimate_swing)
            embedded_tokens += indexed.embedded_tokens
            # The baseline right after its document: a change of machine load during a long run
            # then weighs on both sides alike instead of on whichever ran later.
            pages += page_count(indexed.document)
            texts = _node_texts(indexed.document)
            baseline_s += _time_embedding(embedder, texts)
            one_pass_s += _time_embedding(embedder, _passage_texts(indexed.document))
            nodes += len(texts)
    finally:
        if keep:
            say(
                f"kept collection {collection.slug} (reuse it with bench-retrieval --collection {collection.slug})"
            )
        else:
            collection_delete(collection=collection)
    return IngestBenchRow(
        dataset=path.name,
        documents=documents,
        failed=failed,
        nodes=nodes,
        pipeline_s=round(pipeline_s, 2),
        extract_s=round(stage_totals["extract"], 2),
        pages=pages,
        build_s=round(stage_totals["build"], 2),
        embed_s=round(stage_totals["embed"], 2),
        save_s=round(stage_totals["save"], 2),
        baseline_embed_s=round(baseline_s, 2),
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        document_tokens=document_tokens,
        embedded_tokens=embedded_tokens,
        one_pass_s=round(one_pass_s, 2),
        estimate_swing=round(swing, 2),
    )


def _titles_beside(files_path: Path) -> dict[Any, str]:
    """The titles of the text export beside a files list (``docs.jsonl``), when there is one."""
    docs = files_path.parent / "docs.jsonl"
    return {item.doc_id: item.title for item in read_documents(docs)} if docs.is_file() else {}


def page_count(document: Document) -> int:
    """The pages of a document read from a file (its page map has one span a page), else 0."""
    document.refresh_from_db(fields=["page_spans"])
    return len(document.page_spans or [])


def _node_texts(document: Document) -> list[str]:
    """The exact texts the pipeline embedded for this document, read back from its saved nodes."""
    fields = document_nodes(document=document).values("kind", "toc_path", "summary", "content")
    return [embedding_text(**node) for node in fields.iterator()]


def _passage_texts(document: Document) -> list[str]:
    """The document's passages (its leaves' text): one pass over its tokens."""
    leaves = document_nodes(document=document).filter(kind="leaf").values_list("content", flat=True)
    return list(leaves.iterator())


def _time_embedding(embedder: Embedder, texts: list[str]) -> float:
    batch = settings.EMBEDDING_BATCH_SIZE * 4
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        embedder.embed_passages(texts[start : start + batch])
    return time.perf_counter() - started
