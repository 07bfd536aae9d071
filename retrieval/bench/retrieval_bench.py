"""`manage.py openfable bench-retrieval`: recall and EIR of the engine against flat baselines.

Reads any DragonBall-format JSONL pair (documents: {"doc_id", "company_name", "content"};
queries: {"query": {"query_id", "query_type", "content"}, "ground_truth": {"doc_ids",
"references"}}). The documents are indexed synchronously (structural builder, the configured
embedder) into a throw-away collection, or an existing collection is reused (``--collection``,
which skips ingestion: documents are matched to doc_ids through ``metadata["doc_id"]``, stored at
ingestion, or else through their content). Then, per budget:

- ``ceiling``: every document whole (one chunk per document, budget ignored): references that can
  never match exactly anywhere are the only misses;
- ``oracle``: the engine's own leaves that hold at least one reference sentence of the query,
  packed smallest first into the budget: the best any ranking over these leaves could do;
- ``bm25`` / ``dense``: flat 128-token chunks (see ``baselines``), same embedding model;
- ``vector`` (and ``bipath``, ``llm`` with an LLM configured): ``retrieval.services.retrieve``
  over the collection, without the query cache; ``vector-no-lexical``: vector mode with the
  lexical path turned off (the ablation that shows what it adds).

Recall and EIR are RAGEval's (see ``metrics``). Queries without references are skipped and
counted. Beside them: "right document found" (share of the query's gold documents from which at
least one chunk came back) and, per missed reference, whether its document was not retrieved at all
("wrong document") or was but the passage was not ("right document, wrong passage").
"""

from __future__ import annotations

import inspect
import json
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.bench.metrics import (
    QueryScore,
    SentenceSplitter,
    mean,
    percentile,
    reference_sentences,
    score_sentences,
)

DEFAULT_BUDGETS = (500, 1000, 2000, 4000, 8000)
REFERENCE_METHODS = ("ceiling", "oracle")
BASELINE_METHODS = ("bm25", "dense")
# Engine methods: retrieve() in a mode, with settings changed for an ablation. "vector-no-lexical"
# is vector mode without the lexical path, so every run shows what that path adds.
NO_LEXICAL = {"RETRIEVAL_LEXICAL_WEIGHT": 0.0, "RETRIEVAL_LEXICAL_NODE_SHARE": 0.0}
ENGINE_METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "vector-no-lexical": ("vector", NO_LEXICAL),
    "vector": ("vector", {}),
    "bipath": ("bipath", {}),
    "llm": ("llm", {}),
}
ENGINE_MODES = tuple(ENGINE_METHODS)
ALL_METHODS = (*REFERENCE_METHODS, *BASELINE_METHODS, *ENGINE_MODES)
TYPE_TABLE_BUDGETS = (1000, 4000)  # per-query-type recall is shown at these (when run)

Log = Callable[[str], None]


# -- inputs --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchQuery:
    query_id: Any
    query_type: str
    text: str
    doc_ids: tuple[Any, ...]
    references: tuple[str, ...]


def parse_queries(records: Sequence[dict[str, Any]]) -> list[BenchQuery]:
    queries = []
    for number, record in enumerate(records):
        query = record.get("query") or {}
        truth = record.get("ground_truth") or {}
        queries.append(
            BenchQuery(
                query_id=query.get("query_id", number),
                query_type=str(query.get("query_type") or "(none)"),
                text=str(query.get("content") or ""),
                doc_ids=tuple(truth.get("doc_ids") or ()),
                references=tuple(str(ref) for ref in truth.get("references") or () if str(ref).strip()),
            )
        )
    return queries


def stratified_sample(queries: Sequence[BenchQuery], limit: int) -> list[BenchQuery]:
    """``limit`` queries, each query type in proportion to its share (largest remainder), evenly
    spaced within the type in file order: the same sample every run."""
    if limit <= 0 or limit >= len(queries):
        return list(queries)
    groups: dict[str, list[BenchQuery]] = defaultdict(list)
    for query in queries:
        groups[query.query_type].append(query)
    exact = {name: limit * len(items) / len(queries) for name, items in groups.items()}
    quota = {name: int(share) for name, share in exact.items()}
    by_remainder = sorted(groups, key=lambda name: (-(exact[name] - quota[name]), name))
    for name in by_remainder[: limit - sum(quota.values())]:
        quota[name] += 1
    chosen: list[BenchQuery] = []
    for name, items in groups.items():
        count = quota[name]
        chosen.extend(items[int(index * len(items) / count)] for index in range(count))
    order = {id(query): position for position, query in enumerate(queries)}
    return sorted(chosen, key=lambda query: order[id(query)])


# -- what one method returned for one query at one budget ----------------------------------------


@dataclass
class Retrieved:
    texts: list[str]
    documents: set[Any]  # dataset doc_ids
    tokens: int


@dataclass
class Cell:
    """Per-query outcomes of one method at one budget."""

    recall: list[float] = field(default_factory=list)
    eir: list[float] = field(default_factory=list)
    doc_found: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    by_type: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    misses: Counter[str] = field(default_factory=Counter)
    routing: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    per_query: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        references = sum(self.misses.values())
        return {
            "recall": round(mean(self.recall), 4),
            "eir": round(mean(self.eir), 4),
            "doc_found": round(mean(self.doc_found), 4),
            "mean_tokens": round(mean(self.tokens), 1),
            "queries": len(self.recall),
            "recall_by_type": {name: round(mean(values), 4) for name, values in sorted(self.by_type.items())},
            "references": references,
            "reference_outcomes": {
                name: round(self.misses[name] / references, 4) if references else 0.0
                for name in ("recalled", "unmatchable", "wrong_document", "wrong_passage")
            },
            **({"routing": dict(self.routing)} if self.routing else {}),
            **({"errors": self.errors} if self.errors else {}),
        }


@dataclass(frozen=True)
class PreparedQuery:
    query: BenchQuery
    sentences: list[tuple[str, ...]]  # per non-blank reference
    home: list[Any]  # per reference: the doc_id holding all its sentences, None when none does
    gold_documents: frozenset[Any]  # the query's doc_ids present in the corpus


# -- the run -------------------------------------------------------------------------------------


def bench_retrieval(
    *,
    docs_path: Path,
    queries_path: Path,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    methods: Sequence[str] | None = None,
    max_queries: int = 0,
    keep: bool = False,
    collection_slug: str = "",
    log: Log | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return every number (the JSON report; ``format_report`` prints it)."""
    from documents.bench import _read_jsonl
    from openfable.llm import llm_configured

    say: Log = log or (lambda message: None)
    llm = llm_configured()
    if methods is None:
        methods = [m for m in ALL_METHODS if llm or m not in ("bipath", "llm")]
    records = _read_jsonl(docs_path, 0)
    contents = {record["doc_id"]: str(record["content"]) for record in records}
    all_queries = parse_queries(_read_jsonl(queries_path, 0))
    answerable = [query for query in all_queries if query.references]
    queries = stratified_sample(answerable, max_queries)
    say(f"{len(queries)} queries with references ({len(all_queries) - len(answerable)} without, skipped)")

    split = SentenceSplitter()
    prepared = [_prepare(query, split, contents) for query in queries]
    collection, pk_to_doc, ingestion = _collection_for(
        records, collection_slug=collection_slug, needed=methods, say=say
    )
    report: dict[str, Any] = {
        "docs": str(docs_path),
        "queries_file": str(queries_path),
        "documents": len(records),
        "queries": len(queries),
        "queries_without_references": len(all_queries) - len(answerable),
        "query_types": dict(sorted(Counter(query.query_type for query in queries).items())),
        "budgets": list(budgets),
        "methods": list(methods),
        "llm_configured": llm,
        "collection": collection.slug if collection is not None else None,
        "ingestion": ingestion,
    }
    try:
        cells, latency = _run_methods(
            prepared, methods=methods, budgets=budgets, contents=contents, collection=collection,
            pk_to_doc=pk_to_doc, say=say,
        )  # fmt: skip
    finally:
        if collection is not None and not collection_slug and not keep:
            from documents.models import Collection

            Collection.objects.filter(pk=collection.pk).delete()
            report["collection"] = None
    report["results"] = {
        method: {str(budget): cells[method, budget].summary() for budget in budgets} for method in methods
    }
    report["latency_ms"] = latency
    # Per query, for digging into differences between methods (not printed).
    report["query_details"] = {
        str(item.query.query_id): {"type": item.query.query_type, "doc_ids": list(item.query.doc_ids)}
        for item in prepared
    }
    report["per_query"] = {
        method: {str(budget): cells[method, budget].per_query for budget in budgets}
        for method in methods
        if method != "ceiling"
    }
    report["sentences_segmented"] = len(split)
    return report


def _prepare(query: BenchQuery, split: SentenceSplitter, contents: dict[Any, str]) -> PreparedQuery:
    sentences = reference_sentences(query.references, split)
    gold = [doc for doc in query.doc_ids if doc in contents]
    search_order = gold + [doc for doc in contents if doc not in gold]
    home = [
        next((doc for doc in search_order if all(s in contents[doc] for s in reference)), None)
        for reference in sentences
    ]
    return PreparedQuery(query, sentences, home, frozenset(gold))


def _collection_for(
    records: Sequence[dict[str, Any]], *, collection_slug: str, needed: Sequence[str], say: Log
) -> tuple[Any, dict[int, Any], dict[str, Any]]:
    """The collection to query (ingested now, or reused) and its document pk -> doc_id map."""
    from documents.models import Collection, Document

    if collection_slug:
        collection = Collection.objects.filter(slug=collection_slug).first()
        if collection is None:
            raise BenchInputError(f"--collection {collection_slug}: no such collection")
        by_hash = {_sha256(str(record["content"])): record["doc_id"] for record in records}
        known = {record["doc_id"] for record in records}
        pk_to_doc: dict[int, Any] = {}
        for pk, metadata, content_hash in Document.objects.filter(collection=collection).values_list(
            "pk", "metadata", "content_hash"
        ):
            doc_id = (metadata or {}).get("doc_id")
            pk_to_doc[pk] = doc_id if doc_id in known else by_hash.get(content_hash)
        missing = len(known - set(pk_to_doc.values()))
        if missing:
            say(f"warning: {missing} of the {len(known)} documents are not in collection {collection_slug}")
        return collection, pk_to_doc, {"reused": True, "documents": len(pk_to_doc), "missing": missing}
    if not any(method in needed for method in ("oracle", *ENGINE_MODES)):
        return None, {}, {"skipped": "no method needs the engine"}
    return _ingest(records, say)


def _ingest(records: Sequence[dict[str, Any]], say: Log) -> tuple[Any, dict[int, Any], dict[str, Any]]:
    from documents.indexing import claim_job, document_index, job_fail
    from documents.services import collection_create, document_create
    from openfable.embeddings import get_embedder

    name = f"bench-retrieval {uuid.uuid4().hex[:8]}"
    collection = collection_create(name=name)
    embedder = get_embedder()
    pk_to_doc: dict[int, Any] = {}
    failed = 0
    started = time.perf_counter()
    try:
        for number, record in enumerate(records, 1):
            created = document_create(
                collection=collection,
                content=str(record["content"]),
                title=str(record.get("company_name") or record.get("doc_id") or ""),
                metadata={"doc_id": record["doc_id"]},
                builder="structural",
                queue=False,
            )
            pk_to_doc[created.document.pk] = record["doc_id"]
            if not created.created:
                continue  # the same text twice: indexed already
            job = claim_job(document_id=created.document.pk)
            if job is None:
                continue
            try:
                document_index(job=job, embedder=embedder)
            except Exception as error:  # counted and shown; the benchmark goes on without it
                failed += 1
                job_fail(job=job, error=f"{type(error).__name__}: {error}")
                say(f"FAILED {record.get('doc_id')}: {error}")
            if number % 10 == 0 or number == len(records):
                say(f"ingested {number}/{len(records)} documents ({time.perf_counter() - started:.0f} s)")
    except BaseException:
        collection.delete()
        raise
    seconds = round(time.perf_counter() - started, 1)
    return (
        collection,
        pk_to_doc,
        {"reused": False, "documents": len(records), "failed": failed, "seconds": seconds},
    )


def _sha256(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class BenchInputError(ValueError):
    """Input the user can fix; the CLI prints it as {"error": ...}."""


def _run_methods(
    prepared: Sequence[PreparedQuery],
    *,
    methods: Sequence[str],
    budgets: Sequence[int],
    contents: dict[Any, str],
    collection: Any,
    pk_to_doc: dict[int, Any],
    say: Log,
) -> tuple[dict[tuple[str, int], Cell], dict[str, Any]]:
    from django.conf import settings

    from openfable.embeddings import get_embedder
    from retrieval.bench import baselines

    cells: dict[tuple[str, int], Cell] = defaultdict(Cell)
    timings: dict[str, list[float]] = defaultdict(list)
    stages: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))

    documents_whole = list(contents.values())
    corpus_tokens = 0
    if "ceiling" in methods:
        from openfable.tokens import count_tokens

        corpus_tokens = sum(count_tokens(text) for text in documents_whole)
    leaves: list[tuple[Any, str, int]] = _leaves(collection, pk_to_doc) if "oracle" in methods else []

    chunks: list[baselines.FlatChunk] = []
    if any(method in methods for method in BASELINE_METHODS):
        chunks = baselines.chunk_documents(contents.items())
        say(f"{len(chunks)} flat chunks of <= {baselines.CHUNK_TOKENS} tokens")
    chunk_tokens = [chunk.token_count for chunk in chunks]
    bm25 = baselines.BM25Ranker([chunk.text for chunk in chunks]) if "bm25" in methods else None
    dense = None
    query_vectors = None
    if "dense" in methods:
        embedder = get_embedder()
        cache_dir = Path(settings.DATA_DIR) / "bench-cache"
        matrix = baselines.cached_embeddings(
            embedder, [chunk.text for chunk in chunks], kind="passage", cache_dir=cache_dir, log=say
        )
        dense = baselines.DenseRanker(matrix)
        query_vectors = baselines.cached_embeddings(
            embedder, [item.query.text for item in prepared], kind="query", cache_dir=cache_dir, log=say
        )

    def flat(indices: list[int]) -> Retrieved:
        picked = [chunks[index] for index in indices]
        return Retrieved(
            [chunk.text for chunk in picked],
            {chunk.document for chunk in picked},
            sum(chunk.token_count for chunk in picked),
        )

    engine_modes = [method for method in methods if method in ENGINE_MODES]
    if engine_modes:
        get_embedder().embed_query("warm up")  # the model's load time is not query latency
    started = time.perf_counter()
    for number, item in enumerate(prepared, 1):
        if "ceiling" in methods:
            whole = Retrieved(documents_whole, set(contents), corpus_tokens)
            whole_score = score_sentences(item.sentences, documents_whole)  # the same at every budget
            for budget in budgets:
                _record(cells["ceiling", budget], item, whole, whole_score)
        if "oracle" in methods:
            useful = [
                leaf
                for leaf in leaves
                if any(s in leaf[1] for reference in item.sentences for s in reference)
            ]
            useful.sort(key=lambda leaf: leaf[2])
            for budget in budgets:
                picked = [
                    useful[index]
                    for index in baselines.pack_ranked(range(len(useful)), [u[2] for u in useful], budget)
                ]
                _record(
                    cells["oracle", budget],
                    item,
                    Retrieved([p[1] for p in picked], {p[0] for p in picked}, sum(p[2] for p in picked)),
                )
        if bm25 is not None:
            tick = time.perf_counter()
            order = bm25.rank(item.query.text)
            timings["bm25 (rank)"].append((time.perf_counter() - tick) * 1000)
            for budget in budgets:
                _record(cells["bm25", budget], item, flat(baselines.pack_ranked(order, chunk_tokens, budget)))
        if dense is not None and query_vectors is not None:
            tick = time.perf_counter()
            order = dense.rank(query_vectors[number - 1])
            timings["dense (rank)"].append((time.perf_counter() - tick) * 1000)
            for budget in budgets:
                _record(
                    cells["dense", budget], item, flat(baselines.pack_ranked(order, chunk_tokens, budget))
                )
        for mode in engine_modes:
            for budget in budgets:
                cell = cells[mode, budget]
                tick = time.perf_counter()
                try:
                    result = _engine_retrieve(item.query.text, budget, mode, collection)
                except ValueError as error:  # RetrievalInputError: counted, scored as nothing found
                    cell.errors += 1
                    say(f"{mode} query {item.query.query_id} at {budget}: {error}")
                    _record(cell, item, Retrieved([], set(), 0))
                    continue
                timings[mode].append((time.perf_counter() - tick) * 1000)
                for stage, ms in dict(
                    getattr(result, "timings_ms", None) or getattr(result, "timings", {})
                ).items():
                    stages[mode][stage].append(float(ms))
                cell.routing[str(getattr(result, "routing", "?"))] += 1
                retrieved = Retrieved(
                    [chunk.text for chunk in result.chunks],
                    {pk_to_doc.get(chunk.document_id) for chunk in result.chunks},
                    int(result.total_tokens),
                )
                _record(cell, item, retrieved)
        if number % 25 == 0 or number == len(prepared):
            say(f"queries {number}/{len(prepared)} ({time.perf_counter() - started:.0f} s)")

    latency: dict[str, Any] = {name: _percentiles(values) for name, values in timings.items()}
    for mode, by_stage in stages.items():
        latency[f"{mode} (server stages)"] = {
            stage: _percentiles(values) for stage, values in by_stage.items()
        }
    return cells, latency


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "n": len(values),
    }


def _engine_retrieve(query: str, budget: int, method: str, collection: Any) -> Any:
    from django.test import override_settings

    from retrieval.services import retrieve

    mode, changed_settings = ENGINE_METHODS[method]
    kwargs: dict[str, Any] = {"query": query, "token_budget": budget, "mode": mode}
    if collection is not None:
        kwargs["collection"] = collection.slug
    if "use_cache" in inspect.signature(retrieve).parameters:
        kwargs["use_cache"] = False  # a benchmark measures the engine, not the cache
    # override_settings is Django's supported way to change settings for one block of code.
    with override_settings(**changed_settings):
        return retrieve(**kwargs)


def _leaves(collection: Any, pk_to_doc: dict[int, Any]) -> list[tuple[Any, str, int]]:
    """(doc_id, text, tokens) of every leaf of the collection."""
    from documents.models import Node
    from openfable.tokens import count_tokens

    if collection is None:
        return []
    rows = Node.objects.filter(document__collection=collection, kind=Node.Kind.LEAF).values_list(
        "document_id", "content", "token_count"
    )
    return [
        (pk_to_doc.get(document_id), content, tokens or count_tokens(content))
        for document_id, content, tokens in rows.order_by("document_id", "order").iterator()
    ]


def _record(cell: Cell, item: PreparedQuery, retrieved: Retrieved, score: QueryScore | None = None) -> None:
    score = score or score_sentences(item.sentences, retrieved.texts)
    cell.recall.append(score.recall)
    cell.eir.append(score.eir)
    cell.tokens.append(retrieved.tokens)
    cell.by_type[item.query.query_type].append(score.recall)
    if item.gold_documents:
        cell.doc_found.append(len(item.gold_documents & retrieved.documents) / len(item.gold_documents))
    cell.per_query.append(
        {
            "query_id": item.query.query_id,
            "recall": round(score.recall, 4),
            "eir": round(score.eir, 4),
            "tokens": retrieved.tokens,
            "missing_documents": sorted(item.gold_documents - retrieved.documents, key=str),
        }
    )
    for recalled, home in zip(score.recalled_mask, item.home, strict=True):
        if recalled:
            cell.misses["recalled"] += 1
        elif home is None:
            cell.misses["unmatchable"] += 1
        elif home not in retrieved.documents:
            cell.misses["wrong_document"] += 1
        else:
            cell.misses["wrong_passage"] += 1


# -- tables --------------------------------------------------------------------------------------


def _budget_label(budget: int) -> str:
    return f"{budget // 1000}K" if budget % 1000 == 0 else str(budget)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def format_report(report: dict[str, Any]) -> str:
    budgets = [str(budget) for budget in report["budgets"]]
    labels = [_budget_label(budget) for budget in report["budgets"]]
    results = report["results"]
    methods = list(results)
    lines = [
        f"bench-retrieval: {report['documents']} documents, {report['queries']} queries with references "
        f"({report['queries_without_references']} without references skipped); budgets in cl100k tokens.",
        "",
    ]
    for key, title in (
        ("recall", "Recall (%)"),
        ("eir", "EIR (%)"),
        ("doc_found", "Right document found (% of the query's gold documents with a chunk returned)"),
    ):
        lines += [f"### {title}", ""]
        rows = [[method] + [_pct(results[method][b][key]) for b in budgets] for method in methods]
        lines += [*_table(["method", *labels], rows), ""]
    lines += ["### Tokens returned (mean)", ""]
    rows = [[method] + [f"{results[method][b]['mean_tokens']:.0f}" for b in budgets] for method in methods]
    lines += [*_table(["method", *labels], rows), ""]

    ranked = [m for m in methods if m not in REFERENCE_METHODS]
    if ranked:
        lines += [
            "### Where references go (% of references): recalled / never exact anywhere / "
            "document not returned / document returned, passage missed",
            "",
        ]
        rows = []
        for method in ranked:
            for budget, label in zip(budgets, labels, strict=True):
                outcome = results[method][budget]["reference_outcomes"]
                cells = [
                    _pct(outcome[k]) for k in ("recalled", "unmatchable", "wrong_document", "wrong_passage")
                ]
                routing = results[method][budget].get("routing")
                whole = (
                    f"{_pct(routing.get('documents', 0) / max(1, sum(routing.values())))}" if routing else ""
                )
                rows.append([method, label, *cells, whole])
        header = [
            "method",
            "budget",
            "recalled",
            "unmatchable",
            "wrong document",
            "wrong passage",
            "whole-document routing %",
        ]
        lines += [*_table(header, rows), ""]

    type_budgets = [b for b in map(str, TYPE_TABLE_BUDGETS) if b in budgets] or budgets[
        :: max(1, len(budgets) - 1)
    ]
    types = sorted({name for method in methods for name in results[method][budgets[0]]["recall_by_type"]})
    if types:
        lines += [
            f"### Recall by query type (%) at {', '.join(_budget_label(int(b)) for b in type_budgets)}",
            "",
        ]
        counts = report.get("query_types", {})
        header = ["query type", "n"] + [
            f"{m} {_budget_label(int(b))}" for b in type_budgets for m in methods if m != "ceiling"
        ]
        rows = []
        for name in types:
            row = [name, str(counts.get(name, ""))]
            for b in type_budgets:
                row += [
                    _pct(results[m][b]["recall_by_type"].get(name, 0.0)) for m in methods if m != "ceiling"
                ]
            rows.append(row)
        lines += [*_table(header, rows), ""]

    latency = report.get("latency_ms") or {}
    plain = {name: value for name, value in latency.items() if "p50" in value}
    if plain:
        lines += ["### Query latency (ms; engine: wall time of retrieve(), all budgets together)", ""]
        rows = [[name, f"{v['p50']:.1f}", f"{v['p95']:.1f}", str(v["n"])] for name, v in plain.items()]
        lines += [*_table(["method", "p50", "p95", "calls"], rows), ""]
    for name, by_stage in latency.items():
        if "p50" in by_stage:
            continue
        lines += [f"### {name} (ms)", ""]
        rows = [[stage, f"{v['p50']:.1f}", f"{v['p95']:.1f}"] for stage, v in by_stage.items()]
        lines += [*_table(["stage", "p50", "p95"], rows), ""]
    return "\n".join(lines).rstrip() + "\n"


def write_json(report: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(report, indent=2, default=str))
