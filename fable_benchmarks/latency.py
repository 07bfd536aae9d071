"""`python -m fable_benchmarks bench-latency`: ``vector`` mode latency on a large synthetic corpus.

A throw-away collection of ``nodes`` synthetic nodes (documents of ``nodes_per_document`` nodes:
root -> sections -> subsections -> leaves, leaf text made of random words, exact character spans)
is written without the embedding model: embeddings are random unit vectors with cluster structure
(cluster centre -> document centre -> node, so nearest neighbours concentrate in a few documents
as with real text). Each document goes in through the public services, as any ingestion does:
``document_create`` then ``document_tree_replace`` with its node rows and vectors (the tree swap,
its lexical index and the corpus version in one transaction). The HNSW index stays in place
unless ``rebuild_index`` drops it for the load and recreates it from its own saved definition
(faster, but other users of the table lose the index meanwhile). Then ANALYZE, and ``queries``
timed rounds, each with a query vector near a random document:

- ``vector`` mode through ``retrieval.services.retrieve`` (no cache): its own server-side
  ``timings_ms`` (no embedding stage: the query vector is handed in as ``query_embedding``; the
  query text, words of a random leaf, feeds the lexical path) and the wall time of the call;
- the real embedding of that query text by the configured embedder, timed just before the call
  (synthetic vectors are not in the model's space, so the search cannot use it): added to the
  server time, it is what a query costs with its embedding;
- the bare pgvector top-K: ``SELECT id FROM documents_node ORDER BY embedding <=> q LIMIT K``, at
  the ``hnsw.ef_search`` the engine's vector path uses and at pgvector's default (40). This raw
  query is the benchmark's own yardstick, the least any engine over this table could do.

The ratio vector p50 / bare p50 is what the engine costs on top of the index. The synthetic
collection is deleted afterwards (``collection_delete``) unless ``keep``.
"""

from __future__ import annotations

import math
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count

from documents.ingestion.tree import LEAF, ROOT, SECTION, SUBSECTION
from documents.ingestion.tree_rows import TOC_SEPARATOR, FlatNodeRow, embedding_text
from documents.models import HNSW_INDEX_NAME, Collection, Document
from documents.selectors import collection_get, document_list, document_nodes
from documents.services.collections import collection_create, collection_delete
from documents.services.documents import document_create
from documents.services.trees import document_tree_replace
from fable_benchmarks import BenchInputError
from fable_benchmarks.metrics import percentile
from openfable.embeddings import get_embedder
from openfable.errors import NotFoundError
from openfable.token_counting import count_tokens
from retrieval import services
from retrieval.paths import vector as vector_paths

Log = Callable[[str], None]
WORDS_PER_LEAF = 60
QUERY_WORDS = 5  # words per query text, drawn from a random leaf (the lexical path's input)
VOCABULARY = 5000
SYNTHETIC_MARK = "bench-latency"
SYNTHETIC_MODEL = "synthetic"  # the embedding model recorded on the synthetic documents
HNSW_INDEX = HNSW_INDEX_NAME
PGVECTOR_DEFAULT_EF_SEARCH = 40
TARGET_P50_MS = 50.0
TARGET_WITH_EMBEDDING_P50_MS = 60.0  # the query text's real embedding added


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

    root = add(None, ROOT, 0, 0, 0, leaves - 1, None)
    group = 0
    for s in range(sections):
        span = sum(per_group[group : group + max(1, subsections)])
        section = add(root, SECTION, 1, s, leaf, leaf + span - 1, None)
        for u in range(max(1, subsections)):
            count = per_group[group]
            parent, depth = section, 2
            if subsections:
                parent = add(section, SUBSECTION, 2, u, leaf, leaf + count - 1, None)
                depth = 3
            for ordinal in range(count):
                add(parent, LEAF, depth, ordinal, leaf, leaf, leaf)
                leaf += 1
            group += 1
    return nodes


def synthetic_rows(
    template: list[TemplateNode], *, title: str, leaf_texts: list[str], leaf_tokens: list[int]
) -> list[FlatNodeRow]:
    """One document's node rows, as ``flatten_tree`` would make them from the same tree: leaves
    are the leaf texts joined by blank lines (exact spans), internal nodes get a title, the
    opening of their first leaf as summary, and the tokens of their leaves."""
    starts = [0]
    for text in leaf_texts[:-1]:
        starts.append(starts[-1] + len(text) + 2)
    rows: list[FlatNodeRow] = []
    for position, node in enumerate(template):
        parent = rows[node.parent] if node.parent is not None else None
        if node.kind == LEAF:
            leaf = node.leaf or 0
            name, summary, content, tokens = "", "", leaf_texts[leaf], leaf_tokens[leaf]
        else:
            name = title if node.kind == ROOT else f"{node.kind.title()} {node.ordinal + 1}"
            summary, content = leaf_texts[node.first_leaf][:200], ""
            tokens = sum(leaf_tokens[node.first_leaf : node.last_leaf + 1])
        if parent is None:
            toc_path = name
        elif node.kind == LEAF:
            toc_path = parent.toc_path
        else:
            toc_path = f"{parent.toc_path}{TOC_SEPARATOR}{name}"
        rows.append(
            FlatNodeRow(
                order=position,
                parent_order=node.parent,
                kind=node.kind,
                depth=node.depth,
                ordinal=node.ordinal,
                title=name,
                summary=summary,
                toc_path=toc_path,
                start_char=starts[node.first_leaf],
                end_char=starts[node.last_leaf] + len(leaf_texts[node.last_leaf]),
                content=content,
                token_count=tokens,
                embed_text=embedding_text(
                    kind=node.kind, toc_path=toc_path, summary=summary, content=content
                ),
            )
        )
    return rows


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
    say: Log = log or (lambda message: None)
    dims = int(settings.EMBEDDING_DIMENSIONS)
    rng = np.random.default_rng(seed)
    report: dict[str, Any] = {"budget": budget, "top_k": settings.RETRIEVAL_TOP_K}
    if collection_slug:
        try:
            collection = collection_get(user=None, collection=collection_slug)
        except NotFoundError:
            raise BenchInputError(f"--collection {collection_slug}: no such collection") from None
        centres = _document_centres(collection)
        report["load"] = {"reused": collection_slug}
    else:
        collection, centres, report["load"] = generate_corpus(
            nodes=nodes,
            per_document=nodes_per_document,
            dims=dims,
            rng=rng,
            rebuild_index=rebuild_index,
            say=say,
        )
    try:
        in_collection = document_list(user=None, collection=collection)
        report["corpus"] = {
            "collection_nodes": in_collection.aggregate(nodes=Count("nodes"))["nodes"],
            "collection_documents": in_collection.count(),
            "table_nodes": document_list(user=None).aggregate(nodes=Count("nodes"))["nodes"],
        }
        picks = rng.integers(0, len(centres), size=queries)
        vectors = _unit(centres[picks] + _noise(rng, (queries,), dims, 0.9))
        texts = _query_texts(collection, queries, rng)
        report.update(_time_queries(vectors, texts, budget=budget, say=say))
    finally:
        if not keep and not collection_slug:
            say("deleting the synthetic collection")
            tick = time.perf_counter()
            collection_delete(collection=collection)
            report["delete_s"] = round(time.perf_counter() - tick, 2)
            report["collection"] = None
        else:
            report["collection"] = collection.slug
    return report


def generate_corpus(
    *, nodes: int, per_document: int, dims: int, rng: np.random.Generator, rebuild_index: bool, say: Log
) -> tuple[Collection, np.ndarray, dict[str, Any]]:
    """A new collection of ``nodes // per_document`` synthetic documents (see the module
    docstring), written through the tree service; its documents' centre vectors (query targets),
    in creation order; and the load's timings. Also used by ``bench-cost``."""
    template = tree_template(per_document)
    documents = max(1, nodes // per_document)
    load: dict[str, Any] = {
        "documents": documents,
        "nodes": documents * len(template),
        "rebuild_index": rebuild_index,
    }
    say(f"generating {documents} documents x {len(template)} nodes ({_leaves_in(template)} leaves each)")
    started = time.perf_counter()
    writer = _SyntheticWriter.make(template, documents=documents, dims=dims, rng=rng)
    load["generate_s"] = round(time.perf_counter() - started, 2)
    collection = collection_create(name=f"{SYNTHETIC_MARK} {uuid.uuid4().hex[:8]}")
    try:
        started = time.perf_counter()
        with _hnsw_index_dropped(rebuild_index, nodes=documents * len(template), load=load, say=say):
            for d in range(documents):
                writer.write(collection, d)
                if (d + 1) % 100 == 0:
                    say(f"{d + 1}/{documents} documents written ({time.perf_counter() - started:.0f} s)")
            load["write_s"] = round(time.perf_counter() - started, 2)
            say(
                f"documents written ({load['write_s']} s, index {'dropped' if rebuild_index else 'in place'})"
            )
        load |= _analyze_and_measure()
    except BaseException:
        collection_delete(collection=collection)
        raise
    return collection, writer.doc_centres, load


@dataclass(frozen=True)
class _SyntheticWriter:
    """The random material of a synthetic corpus, and the writing of its documents one by one
    (each draws its words and vectors from ``rng`` in turn, so a seed gives the same corpus)."""

    template: list[TemplateNode]
    dims: int
    rng: np.random.Generator
    vocabulary: np.ndarray
    doc_cluster: np.ndarray  # each document's cluster
    doc_centres: np.ndarray  # each document's centre vector

    @classmethod
    def make(
        cls, template: list[TemplateNode], *, documents: int, dims: int, rng: np.random.Generator
    ) -> _SyntheticWriter:
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
        return cls(template, dims, rng, vocabulary, doc_cluster, doc_centres)

    @cached_property
    def leaves_per_doc(self) -> int:
        return _leaves_in(self.template)

    @cached_property
    def is_leaf(self) -> np.ndarray:
        return np.array([node.kind == LEAF for node in self.template])[:, None]

    def write(self, collection: Collection, d: int) -> None:
        """Document ``d``: random words in its leaves, its nodes' vectors around its centre."""
        rng, template = self.rng, self.template
        words = self.vocabulary[rng.integers(0, VOCABULARY, size=(self.leaves_per_doc, WORDS_PER_LEAF))]
        leaf_texts = [" ".join(row) + "." for row in words]
        title = f"Synthetic document {d + 1}"
        created = document_create(
            collection=collection,
            content="\n\n".join(leaf_texts),
            title=title,
            metadata={SYNTHETIC_MARK: True, "cluster": int(self.doc_cluster[d])},
            builder=Document.Builder.STRUCTURAL,
            queue=False,
        )
        rows = synthetic_rows(
            template,
            title=title,
            leaf_texts=leaf_texts,
            leaf_tokens=[count_tokens(text) for text in leaf_texts],
        )
        noise = np.where(
            self.is_leaf,
            _noise(rng, (len(template),), self.dims, 0.9),
            _noise(rng, (len(template),), self.dims, 0.5),
        )
        document_tree_replace(
            document=created.document,
            rows=rows,
            vectors=_unit(self.doc_centres[d] + noise),
            builder=Document.Builder.STRUCTURAL,
            embedding_model=SYNTHETIC_MODEL,
            job=created.job,
        )


def _leaves_in(template: list[TemplateNode]) -> int:
    return sum(1 for node in template if node.kind == LEAF)


def _analyze_and_measure() -> dict[str, Any]:
    tick = time.perf_counter()
    with connection.cursor() as cursor:
        # Fresh statistics, as a real corpus of this size would have: the plans are then the real ones.
        for table in ("documents_node", "documents_document", "documents_documentterm"):
            cursor.execute(f"ANALYZE {table}")
        # What the table and its HNSW graph take on disk, for sizing a larger run.
        cursor.execute("SELECT pg_total_relation_size('documents_node'), pg_relation_size(%s)", [HNSW_INDEX])
        table_bytes, index_bytes = cursor.fetchone() or (0, 0)
    return {
        "analyze_s": round(time.perf_counter() - tick, 2),
        "node_table_mb": round(table_bytes / 2**20),
        "hnsw_index_mb": round(index_bytes / 2**20),
    }


@contextmanager
def _hnsw_index_dropped(drop: bool, *, nodes: int, load: dict[str, Any], say: Log) -> Iterator[None]:
    """With ``drop``: the HNSW index is dropped for the block and rebuilt from its own saved
    definition after it, even when the block fails (other users of the table lose it meanwhile)."""
    if not drop:
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [HNSW_INDEX])
        row = cursor.fetchone()
        if row is None:
            raise BenchInputError(f"the HNSW index {HNSW_INDEX} is missing: run `manage.py migrate`")
        cursor.execute(f"DROP INDEX {HNSW_INDEX}")
    try:
        yield
    finally:
        tick = time.perf_counter()
        # The whole graph in memory makes the build several times faster (~2.5 KB a node).
        memory_mb = max(1024, nodes * 5 // 2048)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL maintenance_work_mem = '{memory_mb}MB'")
            cursor.execute(str(row[0]))
        load["index_build_s"] = round(time.perf_counter() - tick, 2)
        say(f"HNSW index rebuilt ({load['index_build_s']} s)")


def _document_centres(collection: Collection) -> np.ndarray:
    """Query targets for a reused collection: each document's root embedding."""
    centres = []
    for document in document_list(user=None, collection=collection):
        roots = document_nodes(document=document).filter(kind=ROOT, embedding__isnull=False)
        embedding = roots.values_list("embedding", flat=True).first()
        if embedding is not None:
            centres.append(np.asarray(embedding, dtype=np.float32))
    if not centres:
        raise BenchInputError("that collection has no embedded documents")
    return _unit(np.stack(centres))


# -- timing --------------------------------------------------------------------------------------


def _query_texts(collection: Collection, count: int, rng: np.random.Generator) -> list[str]:
    """Query texts for the lexical path: ``QUERY_WORDS`` words of a random leaf each, so every
    query shares real terms with the corpus (the synthetic vocabulary is uniform: each word is in
    about as many leaves as any other, a hard case for the lexical path)."""
    documents = list(document_list(user=None, collection=collection).order_by("pk"))
    leaves: dict[int, list[str]] = {}
    texts = []
    for pick in rng.integers(0, max(1, len(documents)), size=count):
        if documents and pick not in leaves:
            rows = (
                document_nodes(document=documents[pick]).filter(kind=LEAF).values_list("content", flat=True)
            )
            leaves[pick] = list(rows)
        choices = leaves.get(pick) or ["synthetic latency query"]
        words = choices[int(rng.integers(0, len(choices)))].rstrip(".").split()
        texts.append(" ".join(rng.choice(words, size=min(QUERY_WORDS, len(words)), replace=False)))
    return texts


BARE_SQL = "SELECT id FROM documents_node ORDER BY embedding <=> %s::vector LIMIT %s"
# The "+ 0" keeps the planner off the index: the exact top-K, to measure the index's recall by.
EXACT_SQL = "SELECT id FROM documents_node ORDER BY (embedding <=> %s::vector) + 0 LIMIT %s"


@dataclass
class _QueryTimer:
    """Times vector-mode queries (the query's real embedding apart), and the bare top-K search
    of the same vector, at the engine's beam and at pgvector's default."""

    budget: int
    top_k: int
    ef_search: int
    embedder: Any
    wall: list[float] = field(default_factory=list)
    with_embedding: list[float] = field(default_factory=list)
    embeddings: list[float] = field(default_factory=list)
    stages: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    bare: list[float] = field(default_factory=list)
    bare_default: list[float] = field(default_factory=list)
    strategies: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def run_vector(self, vector: np.ndarray, text: str) -> tuple[float, Any]:
        tick = time.perf_counter()
        result = services.retrieve(
            query=text, token_budget=self.budget, mode="vector", use_cache=False, query_embedding=vector
        )
        return (time.perf_counter() - tick) * 1000, result

    def run_bare(self, literal: str, ef: int | None, sql: str = BARE_SQL) -> tuple[float, list[int]]:
        tick = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cursor:
            if ef is not None:
                cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(ef)])
            cursor.execute(sql, [literal, self.top_k])
            ids = [row[0] for row in cursor.fetchall()]
        return (time.perf_counter() - tick) * 1000, ids

    def embed(self, text: str) -> float:
        # The real embedding of the query text, timed; the search itself uses the synthetic vector.
        tick = time.perf_counter()
        self.embedder.embed_query(text)
        return (time.perf_counter() - tick) * 1000

    def warm_up(self, vector: np.ndarray, text: str) -> None:
        self.embed(text)
        self.run_vector(vector, text)
        self.run_bare(vector_paths.vector_literal(vector), self.ef_search)

    def time(self, vector: np.ndarray, text: str) -> None:
        literal = vector_paths.vector_literal(vector)
        self.embeddings.append(self.embed(text))
        ms, result = self.run_vector(vector, text)
        self.wall.append(ms)
        self.with_embedding.append(float(dict(result.timings_ms).get("total", ms)) + self.embeddings[-1])
        for stage, value in dict(result.timings_ms).items():
            self.stages[stage].append(float(value))
        path = result.path("vector")
        self.strategies[str((path.detail or {}).get("strategy", "?")) if path else "?"] += 1
        self.bare.append(self.run_bare(literal, self.ef_search)[0])
        self.bare_default.append(self.run_bare(literal, None)[0])

    def hnsw_recall(self, vectors: np.ndarray) -> float | None:
        """How much of the exact top-K the index returns at the engine's beam (first 20 queries)."""
        overlap = []
        for vector in vectors[:20]:
            literal = vector_paths.vector_literal(vector)
            approximate = set(self.run_bare(literal, self.ef_search)[1])
            exact = set(self.run_bare(literal, None, EXACT_SQL)[1])
            overlap.append(len(approximate & exact) / max(1, len(exact)))
        return round(float(np.mean(overlap)), 4) if overlap else None


def _time_queries(vectors: np.ndarray, texts: list[str], *, budget: int, say: Log) -> dict[str, Any]:
    top_k = settings.RETRIEVAL_TOP_K
    timer = _QueryTimer(budget, top_k, vector_paths.ef_search_for(top_k), get_embedder())
    for vector, text in list(zip(vectors, texts, strict=True))[:5]:  # warm caches and the connection
        timer.warm_up(vector, text)
    say(f"timing {len(vectors)} queries")
    for vector, text in zip(vectors, texts, strict=True):
        timer.time(vector, text)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + BARE_SQL, [vector_paths.vector_literal(vectors[0]), top_k])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return _timings_report(timer, queries=len(vectors), plan=plan, hnsw_recall=timer.hnsw_recall(vectors))


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 2), "p95": round(percentile(values, 95), 2)}


def _timings_report(
    timer: _QueryTimer, *, queries: int, plan: str, hnsw_recall: float | None
) -> dict[str, Any]:
    server = timer.stages.get("total", timer.wall)
    server_p50 = percentile(server, 50)
    bare_p50 = percentile(timer.bare, 50)
    return {
        "queries": queries,
        "query_words": QUERY_WORDS,
        "vector_server": _summary(server),
        "query_embedding": _summary(timer.embeddings),
        "vector_server_with_embedding": _summary(timer.with_embedding),
        "vector_wall": _summary(timer.wall),
        "vector_stages": {stage: _summary(values) for stage, values in timer.stages.items()},
        "vector_strategy": dict(timer.strategies),
        "bare_topk": {**_summary(timer.bare), "ef_search": timer.ef_search},
        "bare_topk_default_ef": {**_summary(timer.bare_default), "ef_search": PGVECTOR_DEFAULT_EF_SEARCH},
        "ratio_p50": round(server_p50 / bare_p50, 2) if bare_p50 else None,
        "bare_uses_hnsw": HNSW_INDEX in plan,
        "hnsw_recall_at_k": hnsw_recall,
        "target_p50_ms": TARGET_P50_MS,
        "meets_target": server_p50 <= TARGET_P50_MS,
        "target_with_embedding_p50_ms": TARGET_WITH_EMBEDDING_P50_MS,
        "meets_target_with_embedding": percentile(timer.with_embedding, 50) <= TARGET_WITH_EMBEDDING_P50_MS,
    }
