"""`python -m fable_benchmarks bench-ingest-large`: one document at the size limit, indexed on this machine.

The document is made from dataset documents (DragonBall-format JSONL, see ``datasets``): one
markdown section ("# title") per dataset document, in file order, until it holds
OPENFABLE_MAX_DOCUMENT_BYTES (or ``--megabytes``). When the files run out they are used again,
each paragraph marked with its pass ("[2] ...") so that no block is a copy of an earlier one
(the pipeline embeds a repeated text once). It is indexed in this process through the same
services as every runner (``document_create``, then ``job_run_now``), into a throw-away
collection deleted afterwards.

Measured: minutes in all and per stage, peak memory, the structural builder's own time per token
(the build run again on the same text with the model's vectors replayed from memory, so only the
builder's work is timed) against the model's time per token, and the
longest silence of the job's heartbeat as another process sees it (a second connection polls the
job row), which the stalled-job sweep must never take for a dead worker.
"""

from __future__ import annotations

import resource
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection

from documents.ingestion.structural import build_structural_tree
from documents.models import Document, IngestionJob, Node
from documents.services.collections import collection_create, collection_delete
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from fable_benchmarks.datasets import read_documents
from openfable.embeddings import Embedder, get_embedder
from openfable.token_counting import count_tokens

Log = Callable[[str], None]
_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class LargeDocumentRow:
    document_bytes: int
    tokens: int
    nodes: int
    status: str
    minutes: float
    build_s: float
    builder_s: float  # the build again, the model's vectors replayed: the builder's own work
    embed_s: float
    save_s: float
    builder_us_per_token: float
    model_us_per_token: float
    longest_silence_s: float  # the longest wait between two heartbeats another process saw
    silent_stage: str  # the stage that silence fell in
    rss_before_mb: float
    peak_rss_mb: float

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def large_document_text(paths: Sequence[Path], *, size: int) -> str:
    """Markdown of about ``size`` UTF-8 bytes (never more) made from the documents in ``paths``."""
    items = [item for path in paths for item in read_documents(path, 0)]
    if not items:
        raise ValueError("the dataset files hold no documents")
    parts: list[str] = []
    total = 0
    for round_number in range(1, 1000):
        for item in items:
            body = item.content.strip()
            if round_number > 1:
                body = "\n\n".join(f"[{round_number}] {paragraph}" for paragraph in body.split("\n\n"))
            section = f"# {item.title or item.doc_id}\n\n{body}\n\n"
            length = len(section.encode("utf-8"))
            if total + length > size:
                room = size - total
                parts.append(section.encode("utf-8")[:room].decode("utf-8", errors="ignore"))
                return "".join(parts)
            parts.append(section)
            total += length
    return "".join(parts)


class _TimedEmbedder:
    """The model, with the seconds spent in it and the tokens it was given counted."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name, self.dimensions = inner.model_name, inner.dimensions
        self.seconds = 0.0
        self.tokens = 0
        self.vectors: dict[str, np.ndarray] = {}  # to replay them (``replay``)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.tokens += sum(count_tokens(text) for text in texts)  # not timed: not the model's work
        started = time.perf_counter()
        vectors = self.inner.embed_passages(texts)
        self.seconds += time.perf_counter() - started
        self.vectors.update(zip(texts, vectors, strict=True))
        return vectors

    def replay(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.vectors[text] for text in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


@dataclass
class _HeartbeatWatch:
    """Polls the job row from a connection of its own, as the sweep would see it."""

    job_id: int
    stop: threading.Event = field(default_factory=threading.Event)
    longest: float = 0.0
    longest_stage: str = ""
    stage_seconds: dict[str, float] = field(default_factory=dict)

    def run(self) -> None:
        last_beat = None
        last_change = time.monotonic()
        try:
            while not self.stop.wait(_POLL_SECONDS):
                row = (
                    IngestionJob.objects.filter(pk=self.job_id).values("heartbeat", "stage", "status").first()
                )
                if row is None or row["status"] not in (
                    IngestionJob.Status.QUEUED,
                    IngestionJob.Status.RUNNING,
                ):
                    break
                now = time.monotonic()
                if row["heartbeat"] != last_beat:
                    last_beat, last_change = row["heartbeat"], now
                elif now - last_change > self.longest:
                    self.longest, self.longest_stage = now - last_change, row["stage"]
        finally:
            connection.close()


def bench_large_document(
    paths: Sequence[Path], *, size: int | None = None, log: Log | None = None
) -> LargeDocumentRow:
    say: Log = log or (lambda message: None)
    size = size or settings.MAX_DOCUMENT_BYTES
    text = large_document_text(paths, size=size)
    tokens = count_tokens(text)
    say(f"indexing one document of {len(text.encode('utf-8')):,} bytes, {tokens:,} tokens")
    embedder = _TimedEmbedder(get_embedder())
    embedder.inner.embed_passages(["warm up the model"])  # load time is not ingestion time
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    collection = collection_create(name=f"bench large {uuid.uuid4().hex[:6]}")
    try:
        created = document_create(
            collection=collection,
            content=text,
            title="Large document",
            builder=Document.Builder.STRUCTURAL,
            queue=False,
        )
        assert created.job is not None
        watch = _HeartbeatWatch(created.job.pk)
        watcher = threading.Thread(target=watch.run, daemon=True)
        watcher.start()
        started = time.perf_counter()
        run = job_run_now(document_id=created.document.pk, embedder=embedder)
        seconds = time.perf_counter() - started
        watch.stop.set()
        watcher.join(timeout=10)
        peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the replay
        job = run.job if run is not None else IngestionJob.objects.get(pk=created.job.pk)
        timings = {stage: float(job.timings.get(stage, 0.0)) for stage in ("build", "embed", "save")}
        nodes = Node.objects.filter(document=created.document).count()
        started = time.perf_counter()
        build_structural_tree(text, embed=embedder.replay, count_tokens=count_tokens)
        builder_s = time.perf_counter() - started
    finally:
        collection_delete(collection=collection)
    return LargeDocumentRow(
        document_bytes=len(text.encode("utf-8")),
        tokens=tokens,
        nodes=nodes,
        status=job.status if not job.error else f"{job.status}: {job.error[:200]}",
        minutes=round(seconds / 60, 2),
        build_s=round(timings["build"], 1),
        builder_s=round(builder_s, 1),
        embed_s=round(timings["embed"], 1),
        save_s=round(timings["save"], 1),
        builder_us_per_token=round(1e6 * builder_s / max(1, tokens), 1),
        model_us_per_token=round(1e6 * embedder.seconds / max(1, embedder.tokens), 1),
        longest_silence_s=round(watch.longest, 1),
        silent_stage=watch.longest_stage,
        rss_before_mb=round(rss_before, 0),
        peak_rss_mb=round(peak_rss, 0),
    )
