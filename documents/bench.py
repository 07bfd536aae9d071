"""`manage.py openfable bench-ingest`: index datasets with the structural builder and time it.

Reads DragonBall-format JSONL (one {"doc_id", "company_name", "content", ...} per line) and
indexes every document synchronously in this process (exactly what the Celery task runs) into a
throw-away collection, deleted afterwards unless kept. In the same run it embeds the same node
texts with the same model, as the baseline the pipeline is compared with: overhead = pipeline
time / bare embedding time. Each document's baseline is timed right after its pipeline
(interleaved, so that load changing during a long run weighs on both sides alike). The baseline
goes straight to the model, every text from scratch: it does not share the pipeline's memo (see
``documents.indexing.MemoEmbedder``), so vectors the pipeline reused from the builder are
embedded again here.
"""

from __future__ import annotations

import json
import resource
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from documents.indexing import claim_job, document_index, job_fail
from documents.ingestion.pipeline import embedding_text
from documents.models import Collection, Document, IngestionJob, Node
from documents.services import collection_create, document_create
from openfable.embeddings import get_embedder


@dataclass
class IngestBenchRow:
    dataset: str
    documents: int
    failed: int
    nodes: int
    pipeline_s: float
    build_s: float
    embed_s: float
    save_s: float
    baseline_embed_s: float
    peak_rss_mb: float

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


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("bench-ingest", help="time structural ingestion of JSONL datasets")
    parser.add_argument("--docs", action="append", required=True, type=Path, help="JSONL file (repeatable)")
    parser.add_argument("--limit", type=int, default=0, help="first N documents of each file (0: all)")
    parser.add_argument("--json", dest="json_path", type=Path, help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the throw-away collection")
    parser.set_defaults(handler=_handle)


def _handle(options: dict[str, Any]) -> str:
    from openfable.management.commands.openfable import CommandInputError

    for path in options["docs"]:
        if not path.is_file():
            raise CommandInputError(f"--docs {path}: no such file")
    rows = [bench_ingest(path, limit=options["limit"], keep=options["keep"]) for path in options["docs"]]
    if options.get("json_path"):
        result = {"rows": [{**asdict(row), **_derived(row)} for row in rows]}
        options["json_path"].write_text(json.dumps(result, indent=2))
    return format_table(rows)


def bench_ingest(path: Path, *, limit: int = 0, keep: bool = False) -> IngestBenchRow:
    records = _read_jsonl(path, limit)
    collection = collection_create(name=f"bench {path.stem} {uuid.uuid4().hex[:6]}")
    embedder = get_embedder()
    embedder.embed_passages(["warm up the model"])  # load time is not ingestion time
    failed = 0
    stage_totals = {"build": 0.0, "embed": 0.0, "save": 0.0}
    pipeline_s = baseline_s = 0.0
    nodes = 0
    try:
        for record in records:
            started = time.perf_counter()
            document = document_create(
                collection=collection,
                content=record["content"],
                title=str(record.get("company_name") or record.get("doc_id") or ""),
                builder="structural",
                queue=False,
            ).document
            job = claim_job(document_id=document.pk)
            assert job is not None
            try:
                document_index(job=job, embedder=embedder)
            except Exception as error:  # counted and shown, the run goes on
                failed += 1
                job_fail(job=job, error=f"{type(error).__name__}: {error}")
                print(f"FAILED {record.get('doc_id')}: {error}", flush=True)
            pipeline_s += time.perf_counter() - started
            # The baseline right after its document: a change of machine load during a long run
            # then weighs on both sides alike instead of on whichever ran later.
            texts = _node_texts(document)
            baseline_s += _time_embedding(embedder, texts)
            nodes += len(texts)
        jobs = IngestionJob.objects.filter(document__collection=collection)
        for timings in jobs.values_list("timings", flat=True):
            for stage in stage_totals:
                stage_totals[stage] += float(timings.get(stage, 0.0))
    finally:
        if not keep:
            Collection.objects.filter(pk=collection.pk).delete()
    return IngestBenchRow(
        dataset=path.name,
        documents=len(records),
        failed=failed,
        nodes=nodes,
        pipeline_s=round(pipeline_s, 2),
        build_s=round(stage_totals["build"], 2),
        embed_s=round(stage_totals["embed"], 2),
        save_s=round(stage_totals["save"], 2),
        baseline_embed_s=round(baseline_s, 2),
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    )


def _read_jsonl(path: Path, limit: int) -> list[dict[str, Any]]:
    records = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                records.append(json.loads(line))
            if limit and len(records) >= limit:
                break
    return records


def _node_texts(document: Document) -> list[str]:
    """The exact texts the pipeline embedded for this document, read back from its saved nodes."""
    nodes = Node.objects.filter(document=document).order_by("order")
    fields = nodes.values("kind", "toc_path", "summary", "content")
    return [embedding_text(**node) for node in fields.iterator()]


def _time_embedding(embedder: Any, texts: list[str]) -> float:
    batch = settings.EMBEDDING_BATCH_SIZE * 4
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        embedder.embed_passages(texts[start : start + batch])
    return time.perf_counter() - started


def _derived(row: IngestBenchRow) -> dict[str, float]:
    return {
        "docs_per_minute": round(row.docs_per_minute, 1),
        "nodes_per_second": round(row.nodes_per_second, 1),
        "embed_share": round(row.embed_share, 3),
        "overhead": round(row.overhead, 3),
    }


def format_table(rows: list[IngestBenchRow]) -> str:
    header = (
        "| dataset | docs | failed | nodes | pipeline s | docs/min | nodes/s | build s | embed s | save s "
        "| embed share | bare embedding s | pipeline / bare | peak RSS MB |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for row in rows:
        derived = _derived(row)
        lines.append(
            f"| {row.dataset} | {row.documents} | {row.failed} | {row.nodes} | {row.pipeline_s:.1f} "
            f"| {derived['docs_per_minute']:.1f} | {derived['nodes_per_second']:.1f} | {row.build_s:.1f} "
            f"| {row.embed_s:.1f} | {row.save_s:.1f} | {derived['embed_share']:.0%} "
            f"| {row.baseline_embed_s:.1f} | {derived['overhead']:.2f}x | {row.peak_rss_mb:.0f} |"
        )
    return "\n".join(lines)
