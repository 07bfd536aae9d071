"""`manage.py openfable bench-latency`: ``vector`` mode latency on a large synthetic corpus.

A throw-away collection of ``nodes`` synthetic nodes (documents of ``nodes_per_document`` nodes:
root -> sections -> subsections -> leaves, leaf text made of random words, exact character spans)
is written straight into the tables, without the embedding model: embeddings are random unit
vectors with cluster structure (cluster centre -> document centre -> node, so nearest neighbours
concentrate in a few documents as with real text). Nodes go in with binary COPY on a separate
connection; the HNSW index stays in place unless ``rebuild_index`` drops it for the load and
recreates it from its own saved definition (faster, but other users of the table lose the index
meanwhile). Then ANALYZE, and ``queries`` timed rounds, each with a query vector near a random
document:

- ``vector`` mode through ``retrieval.services.retrieve`` (no cache): its own server-side
  ``timings_ms`` (no embedding stage: the query vector is handed in as ``query_embedding``; the
  query text, words of a random leaf, feeds the lexical path) and the wall time of the call;
- the bare pgvector top-K: ``SELECT id FROM documents_node ORDER BY embedding <=> q LIMIT K``, at
  the ``hnsw.ef_search`` the engine's vector path uses and at pgvector's default (40).

The ratio vector p50 / bare p50 is what the engine costs on top of the index. Everything synthetic
is deleted afterwards unless ``keep``.
"""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.bench.metrics import percentile

Log = Callable[[str], None]
WORDS_PER_LEAF = 60
QUERY_WORDS = 5  # words per query text, drawn from a random leaf (the lexical path's input)
VOCABULARY = 5000
SYNTHETIC_MARK = "bench-latency"
HNSW_INDEX = "node_embedding_hnsw"
PGVECTOR_DEFAULT_EF_SEARCH = 40
TARGET_P50_MS = 50.0
_COPY_COLUMNS = (
    "id", "document_id", "parent_id", "kind", "depth", "ordinal", "order", "title", "summary",
    "toc_path", "start_char", "end_char", "content", "token_count", "embedding", "edited",
)  # fmt: skip
_COPY_TYPES = (
    "int8", "int8", "int8", "varchar", "int2", "int4", "int4", "varchar", "text",
    "text", "int4", "int4", "text", "int4", "vector", "bool",
)  # fmt: skip


class BenchInputError(ValueError):
    """Input the user can fix; the CLI prints it as {"error": ...}."""


# -- the synthetic tree shape --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TemplateNode:
    parent: int | None  # index in the template
    kind: str
    depth: int
    ordinal: int
    leaf: int | None  # leaf number (document order) for leaves
    first_leaf: int  # span: leaves [first_leaf, last_leaf]
    last_leaf: int


def tree_template(size: int) -> list[TemplateNode]:
    """One document's nodes in pre-order: a root, ~size/25 sections of three subsections each
    (or none when too small), and the remaining nodes as leaves spread evenly under them."""
    sections = max(1, size // 25)
    subsections = 3 if 1 + 4 * sections + 3 * sections <= size else 0
    groups = sections * subsections if subsections else sections
    leaves = size - 1 - sections - sections * subsections
    if leaves < groups:
        raise BenchInputError(f"{size} nodes per document is too few for this tree shape")
    per_group = [leaves // groups + (1 if g < leaves % groups else 0) for g in range(groups)]
    nodes: list[TemplateNode] = []
    leaf = 0

    def add(
        parent: int | None, kind: str, depth: int, ordinal: int, first: int, last: int, number: int | None
    ) -> int:
        nodes.append(TemplateNode(parent, kind, depth, ordinal, number, first, last))
        return len(nodes) - 1

    root = add(None, "root", 0, 0, 0, leaves - 1, None)
    group = 0
    for s in range(sections):
        span = sum(per_group[group : group + max(1, subsections)])
        section = add(root, "section", 1, s, leaf, leaf + span - 1, None)
        for u in range(max(1, subsections)):
            count = per_group[group]
            parent, depth = section, 2
            if subsections:
                parent = add(section, "subsection", 2, u, leaf, leaf + count - 1, None)
                depth = 3
            for ordinal in range(count):
                add(parent, "leaf", depth, ordinal, leaf, leaf, leaf)
                leaf += 1
            group += 1
    return nodes


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def _noise(rng: np.random.Generator, shape: tuple[int, ...], dims: int, scale: float) -> np.ndarray:
    # Each row has norm ~scale: comparable to the unit centres it perturbs.
    return rng.standard_normal((*shape, dims)).astype(np.float32) * (scale / math.sqrt(dims))


# -- the run -------------------------------------------------------------------------------------


def bench_latency(
    *,
    nodes: int = 100_000,
    nodes_per_document: int = 100,
    queries: int = 200,
    budget: int = 2000,
    rebuild_index: bool = False,
    keep: bool = False,
    collection_slug: str = "",
    log: Log | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    from django.conf import settings

    from documents.models import Collection, Document, Node

    say: Log = log or (lambda message: None)
    dims = int(settings.EMBEDDING_DIMENSIONS)
    rng = np.random.default_rng(seed)
    report: dict[str, Any] = {"budget": budget, "top_k": settings.RETRIEVAL_TOP_K}
    if collection_slug:
        collection = Collection.objects.filter(slug=collection_slug).first()
        if collection is None:
            raise BenchInputError(f"--collection {collection_slug}: no such collection")
        centres = _document_centres_from_db(collection, dims)
        report["load"] = {"reused": collection_slug}
    else:
        collection, centres, report["load"] = _generate(
            nodes=nodes,
            per_document=nodes_per_document,
            dims=dims,
            rng=rng,
            rebuild_index=rebuild_index,
            say=say,
        )
    try:
        report["corpus"] = {
            "collection_nodes": Node.objects.filter(document__collection=collection).count(),
            "collection_documents": Document.objects.filter(collection=collection).count(),
            "table_nodes": Node.objects.count(),
        }
        picks = rng.integers(0, len(centres), size=queries)
        vectors = _unit(centres[picks] + _noise(rng, (queries,), dims, 0.9))
        texts = _query_texts(collection, queries, rng)
        report.update(_time_queries(vectors, texts, budget=budget, say=say))
    finally:
        if not keep and not collection_slug:
            say("deleting the synthetic collection")
            _delete_collection(collection.pk)
            report["collection"] = None
        else:
            report["collection"] = collection.slug
    return report


def _generate(
    *, nodes: int, per_document: int, dims: int, rng: np.random.Generator, rebuild_index: bool, say: Log
) -> tuple[Any, np.ndarray, dict[str, Any]]:
    from documents.models import Document
    from documents.services import DOCUMENT_TERMS_SQL, collection_create, corpus_version_bump
    from openfable.tokens import count_tokens

    template = tree_template(per_document)
    documents = max(1, nodes // per_document)
    leaves_per_doc = sum(1 for node in template if node.kind == "leaf")
    load: dict[str, Any] = {
        "documents": documents,
        "nodes": documents * len(template),
        "rebuild_index": rebuild_index,
    }
    say(f"generating {documents} documents x {len(template)} nodes ({leaves_per_doc} leaves each)")

    started = time.perf_counter()
    vocabulary = np.array(
        [
            "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=int(n)))
            for n in rng.integers(2, 10, size=VOCABULARY)
        ]
    )
    clusters = max(4, documents // 10)
    cluster_centres = _unit(rng.standard_normal((clusters, dims)).astype(np.float32))
    doc_cluster = rng.integers(0, clusters, size=documents)
    doc_centres = _unit(cluster_centres[doc_cluster] + _noise(rng, (documents,), dims, 0.7))

    collection = collection_create(name=f"{SYNTHETIC_MARK} {uuid.uuid4().hex[:8]}")
    try:
        texts: list[list[str]] = []
        rows = []
        for d in range(documents):
            words = vocabulary[rng.integers(0, VOCABULARY, size=(leaves_per_doc, WORDS_PER_LEAF))]
            leaf_texts = [" ".join(row) + "." for row in words]
            texts.append(leaf_texts)
            content = "\n\n".join(leaf_texts)
            rows.append(
                Document(
                    collection=collection,
                    title=f"Synthetic document {d + 1}",
                    content=content,
                    content_hash=hashlib.sha256(content.encode()).hexdigest(),
                    token_count=0,
                    status=Document.Status.INDEXED,
                    builder=Document.Builder.STRUCTURAL,
                    embedding_model="synthetic",
                    metadata={SYNTHETIC_MARK: True, "cluster": int(doc_cluster[d])},
                )
            )
        leaf_tokens = [[count_tokens(text) for text in leaf_texts] for leaf_texts in texts]
        for document, tokens in zip(rows, leaf_tokens, strict=True):
            document.token_count = sum(tokens)
        Document.objects.bulk_create(rows, batch_size=100)
        load["generate_s"] = round(time.perf_counter() - started, 2)
        say(f"documents written ({load['generate_s']} s); copying nodes")

        started = time.perf_counter()
        with _raw_connection() as raw:
            index_sql = _index_definition(raw)
            if rebuild_index:
                raw.execute(f"DROP INDEX IF EXISTS {HNSW_INDEX}")
                raw.commit()
            try:
                _copy_nodes(raw, rows, texts, leaf_tokens, template, doc_centres, rng, dims)
                raw.commit()
                load["copy_s"] = round(time.perf_counter() - started, 2)
                say(f"nodes copied ({load['copy_s']} s, index {'dropped' if rebuild_index else 'in place'})")
            finally:
                if rebuild_index:
                    tick = time.perf_counter()
                    raw.rollback()
                    # The whole graph in memory makes the build several times faster (~2.5 KB a node).
                    memory_mb = max(1024, documents * len(template) * 5 // 2048)
                    raw.execute(f"SET maintenance_work_mem = '{memory_mb}MB'")
                    raw.execute(index_sql)
                    raw.commit()
                    load["index_build_s"] = round(time.perf_counter() - tick, 2)
                    say(f"HNSW index rebuilt ({load['index_build_s']} s)")
            tick = time.perf_counter()
            raw.execute(DOCUMENT_TERMS_SQL, [[document.pk for document in rows]])  # the lexical index
            raw.commit()
            load["terms_s"] = round(time.perf_counter() - tick, 2)
            tick = time.perf_counter()
            raw.execute("ANALYZE documents_node")
            raw.execute("ANALYZE documents_document")
            raw.execute("ANALYZE documents_documentterm")
            raw.commit()
            load["analyze_s"] = round(time.perf_counter() - tick, 2)
        corpus_version_bump()
    except BaseException:
        _delete_collection(collection.pk)
        raise
    return collection, doc_centres, load


def _copy_nodes(
    raw: Any,
    documents: list[Any],
    texts: list[list[str]],
    leaf_tokens: list[list[int]],
    template: list[TemplateNode],
    doc_centres: np.ndarray,
    rng: np.random.Generator,
    dims: int,
) -> None:
    total = len(documents) * len(template)
    ids = [row[0] for row in raw.execute(
        "SELECT nextval(pg_get_serial_sequence('documents_node', 'id')) FROM generate_series(1, %s)", [total]
    ).fetchall()]  # fmt: skip
    columns = ", ".join(f'"{name}"' for name in _COPY_COLUMNS)
    internal_noise, leaf_noise = 0.5, 0.9
    next_id = iter(ids)
    with (
        raw.cursor() as cursor,
        cursor.copy(f"COPY documents_node ({columns}) FROM STDIN (FORMAT BINARY)") as copy,
    ):
        copy.set_types(list(_COPY_TYPES))
        for d, document in enumerate(documents):
            leaf_texts = texts[d]
            starts = [0]
            for text in leaf_texts[:-1]:
                starts.append(starts[-1] + len(text) + 2)
            noise = np.where(
                np.array([node.kind == "leaf" for node in template])[:, None],
                _noise(rng, (len(template),), dims, leaf_noise),
                _noise(rng, (len(template),), dims, internal_noise),
            )
            vectors = _unit(doc_centres[d] + noise)
            node_ids = [next(next_id) for _ in template]
            titles: list[str] = []
            for position, node in enumerate(template):
                start = starts[node.first_leaf]
                end = starts[node.last_leaf] + len(leaf_texts[node.last_leaf])
                if node.kind == "leaf":
                    title, summary, content = "", "", leaf_texts[node.leaf or 0]
                    tokens = leaf_tokens[d][node.leaf or 0]
                else:
                    title = (
                        document.title if node.kind == "root" else f"{node.kind.title()} {node.ordinal + 1}"
                    )
                    summary = leaf_texts[node.first_leaf][:200]
                    content = ""
                    tokens = sum(leaf_tokens[d][node.first_leaf : node.last_leaf + 1])
                titles.append(title)
                path = [titles[p] for p in _ancestors(template, position)] + ([title] if title else [])
                copy.write_row((
                    node_ids[position], document.pk,
                    None if node.parent is None else node_ids[node.parent],
                    node.kind, node.depth, node.ordinal, position, title[:500], summary,
                    " › ".join(path), start, end, content, tokens, vectors[position], False,
                ))  # fmt: skip


def _ancestors(template: list[TemplateNode], position: int) -> list[int]:
    chain = []
    parent = template[position].parent
    while parent is not None:
        chain.append(parent)
        parent = template[parent].parent
    return chain[::-1]


def _document_centres_from_db(collection: Any, dims: int) -> np.ndarray:
    """Query targets for a reused collection: each document's root embedding."""
    from documents.models import Node

    rows = Node.objects.filter(document__collection=collection, kind=Node.Kind.ROOT).values_list(
        "embedding", flat=True
    )
    centres = [np.asarray(row, dtype=np.float32) for row in rows if row is not None]
    if not centres:
        raise BenchInputError("that collection has no embedded documents")
    return _unit(np.stack(centres))


@contextmanager
def _raw_connection() -> Iterator[Any]:
    """A psycopg connection of its own, with pgvector's binary types (Django's stays untouched)."""
    import psycopg
    from django.db import connection
    from pgvector.psycopg import register_vector

    settings_dict = connection.settings_dict
    params = {
        "dbname": settings_dict["NAME"],
        "user": settings_dict.get("USER") or None,
        "password": settings_dict.get("PASSWORD") or None,
        "host": settings_dict.get("HOST") or None,
        "port": settings_dict.get("PORT") or None,
        **(settings_dict.get("OPTIONS") or {}),
    }
    raw = psycopg.connect(**{key: value for key, value in params.items() if value is not None})
    try:
        register_vector(raw)
        yield raw
    finally:
        raw.close()


def _index_definition(raw: Any) -> str:
    row = raw.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [HNSW_INDEX]).fetchone()
    if row is None:
        raise BenchInputError(f"the HNSW index {HNSW_INDEX} is missing: run `manage.py migrate`")
    return str(row[0])


def _delete_collection(collection_pk: int) -> None:
    """Nodes go in one SQL statement (the ORM would collect 100K objects first), then the rest."""
    from django.db import connection

    from documents.models import Collection
    from documents.services import corpus_version_bump

    with connection.cursor() as cursor:
        for table in ("documents_node", "documents_documentterm"):
            cursor.execute(
                f"DELETE FROM {table} WHERE document_id IN "
                "(SELECT id FROM documents_document WHERE collection_id = %s)",
                [collection_pk],
            )
    Collection.objects.filter(pk=collection_pk).delete()
    corpus_version_bump()


# -- timing --------------------------------------------------------------------------------------


def _query_texts(collection: Any, count: int, rng: np.random.Generator) -> list[str]:
    """Query texts for the lexical path: ``QUERY_WORDS`` words of a random leaf each, so every
    query shares real terms with the corpus (the synthetic vocabulary is uniform: each word is in
    about as many leaves as any other, a hard case for the lexical path)."""
    from documents.models import Node

    leaves = list(
        Node.objects.filter(document__collection=collection, kind=Node.Kind.LEAF)
        .order_by("?")
        .values_list("content", flat=True)[:count]
    )
    texts = []
    for index in range(count):
        words = (leaves[index % len(leaves)] if leaves else "synthetic latency query").rstrip(".").split()
        texts.append(" ".join(rng.choice(words, size=min(QUERY_WORDS, len(words)), replace=False)))
    return texts


def _time_queries(vectors: np.ndarray, texts: list[str], *, budget: int, say: Log) -> dict[str, Any]:
    from django.conf import settings
    from django.db import connection, transaction

    from retrieval import services
    from retrieval.paths import vector as vector_paths

    top_k = settings.RETRIEVAL_TOP_K
    ef_search = vector_paths.ef_search_for(top_k)
    bare_sql = "SELECT id FROM documents_node ORDER BY embedding <=> %s::vector LIMIT %s"
    exact_sql = "SELECT id FROM documents_node ORDER BY (embedding <=> %s::vector) + 0 LIMIT %s"

    def run_vector(vector: np.ndarray, text: str) -> tuple[float, Any]:
        tick = time.perf_counter()
        result = services.retrieve(
            query=text, token_budget=budget, mode="vector", use_cache=False, query_embedding=vector
        )
        return (time.perf_counter() - tick) * 1000, result

    def run_bare(literal: str, ef: int | None, sql: str = bare_sql) -> tuple[float, list[int]]:
        tick = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            if ef is not None:
                cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef)])
            cursor.execute(sql, [literal, top_k])
            ids = [row[0] for row in cursor.fetchall()]
        return (time.perf_counter() - tick) * 1000, ids

    wall: list[float] = []
    stages: dict[str, list[float]] = defaultdict(list)
    bare: list[float] = []
    bare_default: list[float] = []
    strategies: dict[str, int] = defaultdict(int)
    for vector, text in list(zip(vectors, texts, strict=True))[:5]:  # warm caches and the connection
        run_vector(vector, text)
        run_bare(vector_paths.vector_literal(vector), ef_search)
    say(f"timing {len(vectors)} queries")
    for vector, text in zip(vectors, texts, strict=True):
        literal = vector_paths.vector_literal(vector)
        ms, result = run_vector(vector, text)
        wall.append(ms)
        for stage, value in dict(result.timings_ms).items():
            stages[stage].append(float(value))
        path = result.path("vector") if hasattr(result, "path") else None
        strategies[str((path.detail or {}).get("strategy", "?")) if path else "?"] += 1
        bare.append(run_bare(literal, ef_search)[0])
        bare_default.append(run_bare(literal, None)[0])
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + bare_sql, [vector_paths.vector_literal(vectors[0]), top_k])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    overlap = []
    for vector in vectors[:20]:  # how much of the exact top-K the index returns at that beam
        literal = vector_paths.vector_literal(vector)
        approximate = set(run_bare(literal, ef_search)[1])
        exact = set(run_bare(literal, None, exact_sql)[1])
        overlap.append(len(approximate & exact) / max(1, len(exact)))

    def summary(values: list[float]) -> dict[str, float]:
        return {"p50": round(percentile(values, 50), 2), "p95": round(percentile(values, 95), 2)}

    server = stages.get("total", wall)
    server_p50 = percentile(server, 50)
    bare_p50 = percentile(bare, 50)
    return {
        "queries": len(vectors),
        "query_words": QUERY_WORDS,
        "vector_server": summary(server),
        "vector_wall": summary(wall),
        "vector_stages": {stage: summary(values) for stage, values in stages.items()},
        "vector_strategy": dict(strategies),
        "bare_topk": {**summary(bare), "ef_search": ef_search},
        "bare_topk_default_ef": {**summary(bare_default), "ef_search": PGVECTOR_DEFAULT_EF_SEARCH},
        "ratio_p50": round(server_p50 / bare_p50, 2) if bare_p50 else None,
        "bare_uses_hnsw": HNSW_INDEX in plan,
        "hnsw_recall_at_k": round(float(np.mean(overlap)), 4) if overlap else None,
        "target_p50_ms": TARGET_P50_MS,
        "meets_target": server_p50 <= TARGET_P50_MS,
    }


def format_latency(report: dict[str, Any]) -> str:
    corpus = report.get("corpus", {})
    load = report.get("load", {})
    lines = [
        f"bench-latency: {corpus.get('collection_nodes', '?')} synthetic nodes in "
        f"{corpus.get('collection_documents', '?')} documents "
        f"({corpus.get('table_nodes', '?')} nodes in the table), "
        f"{report['queries']} queries, budget {report['budget']}, top-K {report['top_k']}.",
        "",
        "| measure | p50 ms | p95 ms | note |",
        "|---|---|---|---|",
    ]
    server, wall = report["vector_server"], report["vector_wall"]
    bare, default = report["bare_topk"], report["bare_topk_default_ef"]
    lines += [
        f"| vector mode, server-side (timings_ms.total) | {server['p50']:.1f} | {server['p95']:.1f} "
        f"| strategy {', '.join(report['vector_strategy'])}; target p50 <= {report['target_p50_ms']:.0f} ms: "
        f"{'met' if report['meets_target'] else 'NOT met'} |",
        f"| vector mode, wall time of retrieve() | {wall['p50']:.1f} | {wall['p95']:.1f} "
        f"| query text: {report['query_words']} words of a random leaf (lexical path) |",
        f"| bare pgvector top-K, ef_search {bare['ef_search']} | {bare['p50']:.1f} | {bare['p95']:.1f} "
        f"| vector / bare p50 = {report['ratio_p50']}x; uses HNSW: {report['bare_uses_hnsw']}; "
        f"recall@K vs exact: {report['hnsw_recall_at_k']} |",
        f"| bare pgvector top-K, ef_search {default['ef_search']} | {default['p50']:.1f} "
        f"| {default['p95']:.1f} | pgvector default beam |",
        "",
        "| vector stage | p50 ms | p95 ms |",
        "|---|---|---|",
    ]
    lines += [
        f"| {stage} | {v['p50']:.1f} | {v['p95']:.1f} |" for stage, v in report["vector_stages"].items()
    ]
    if load and not load.get("reused"):
        parts = ", ".join(f"{key} {value}" for key, value in load.items())
        lines += ["", f"Load: {parts}."]
    if report.get("collection"):
        lines += [
            "",
            f"Kept collection: {report['collection']} (reuse it with --collection {report['collection']})",
        ]
    return "\n".join(lines) + "\n"
