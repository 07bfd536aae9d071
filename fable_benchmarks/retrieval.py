"""`python -m fable_benchmarks bench-retrieval`: recall and EIR of the engine against flat baselines.

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
- the peers, the pipelines the popular frameworks ship by default (see ``baselines`` and
  ``peers``), same embedding model, packed greedily by score: ``hybrid-256`` / ``hybrid-512``
  (BM25 and dense over 256- / 512-token chunks overlapping by ~15 %, fused by reciprocal rank
  fusion, k = 60) and ``parent-child`` (the engine's leaves ranked so, their parent sections
  returned). No ``hybrid-512-rerank``: no registry package ships a cross-encoder's weights (the
  ones that rerank download them from a model hub at run time, which this benchmark cannot);
- ``vector`` (and ``bipath``, ``llm`` with an LLM configured): ``retrieval.services.retrieve``
  over the collection, without the query cache; the ablations that show what a part adds:
  ``vector-no-lexical`` (vector mode with the lexical path turned off), ``vector-whole-query``
  (passages ranked by the whole query, the titles of the documents it names included),
  ``vector-full-names`` (the query's names weigh fully in node-level BM25), ``vector-unnamed``
  (the documents a query names by their title are not routed to unless their scores choose them,
  and their namesakes are not left out), ``vector-source-words`` (the words of the query's opening
  "According to ...," clause weigh fully in node-level BM25).

From files (``--files``, a list of ``{"doc_id", "file"}`` such as ``cuad/pdfs.jsonl``): the same
documents are also uploaded as their original files, through the one write path (the file stored,
the job's extraction stage reading it in a child process, then the structural builder), into a
second collection, and the methods that need no flat chunks run on both in the same run. Matching
is then done on normalised text on both sides alike (``extraction.normalise``: NFKC, straight
quotes and dashes, no invisible characters, whitespace collapsed, "non- exclusive" read as
"non-exclusive"), since a PDF's text never matches a separate text export byte for byte. The
report adds the extraction ceiling (the share of gold references whose every sentence is in the
extracted text of their document), the upload path's extraction time per page, and the extractor's
own pages per second and peak memory in a fresh process (``bench-extract``'s measure).

Scoped (``scoped=True``, ``--scoped``): each single-document query asked as a person asks it on
its document's page, without the name of the document and the clause that cites it
(``scoped.scoped_query``), and filtered to its gold document (``documents=[id]`` for the engine,
that document's chunks and leaves for the others; ``ceiling`` is that document whole). The
queries are sampled as without it (``max_queries``), then the multi-document ones are left out.

Recall and EIR are RAGEval's (see ``metrics``). Queries without references are skipped and
counted. Beside them: "right document found" (share of the query's gold documents from which at
least one chunk came back) and, per missed reference, whether its document was not retrieved at all
("wrong document") or was but the passage was not ("right document, wrong passage").
"""

from __future__ import annotations

import hashlib
import subprocess
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from documents.ingestion.tree import LEAF, ROOT
from documents.models import Collection
from documents.selectors import collection_get, document_list, document_nodes
from documents.services.collections import collection_create, collection_delete
from fable_benchmarks import BenchInputError, baselines
from fable_benchmarks.datasets import (
    BenchQuery,
    DatasetDocument,
    read_documents,
    read_file_documents,
    read_queries,
)
from fable_benchmarks.extraction import bench_extract, normalise
from fable_benchmarks.ingest import index_dataset_document, page_count
from fable_benchmarks.metrics import (
    QueryScore,
    SentenceSplitter,
    mean,
    percentile,
    reference_sentences,
    score_sentences,
)
from fable_benchmarks.passage_cache import CachedPassageEmbedder
from fable_benchmarks.peers import ChunkIndex, ParentChild
from fable_benchmarks.scoped import document_names, scoped_query
from openfable.embeddings import get_embedder
from openfable.errors import NotFoundError
from openfable.llm import LLMUsage, counts_since, fallback_counts, llm_configured
from openfable.token_counting import count_tokens
from retrieval.query_settings import QuerySettings
from retrieval.result import RetrievalInputError, RetrievalResult
from retrieval.services import retrieve

DEFAULT_BUDGETS = (500, 1000, 2000, 4000, 8000)
REFERENCE_METHODS = ("ceiling", "oracle")
BASELINE_METHODS = ("bm25", "dense")
PARENT_CHILD = "parent-child"
PEER_METHODS = (*baselines.PEERS, PARENT_CHILD)  # what a user would pick instead of the engine
# Engine methods: retrieve() in a mode, with the query's settings changed for an ablation (the
# fields of retrieval.query_settings.QuerySettings that change). "vector-no-lexical" is vector
# mode without the lexical path, "vector-whole-query" without the passage query (see
# retrieval.routing.take_out_titles), so every run shows what each adds.
ENGINE_METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "vector-no-lexical": ("vector", {"lexical_weight": 0.0, "lexical_node_share": 0.0}),
    # Passages ranked by the whole query, the titles of the documents it names included.
    "vector-whole-query": ("vector", {"passage_query": False}),
    # Names in the query weigh fully in node-level BM25 (see retrieval.paths.lexical.name_weights).
    "vector-full-names": ("vector", {"name_document_share": 0.0}),
    # Only the scores route: the documents the query names by title get no say.
    "vector-unnamed": ("vector", {"named_documents": False}),
    # The words of the query's opening source clause weigh fully in node-level BM25.
    "vector-source-words": ("vector", {"source_clause": False}),
    "vector": ("vector", {}),
    "bipath": ("bipath", {}),
    "llm": ("llm", {}),
}
ENGINE_MODES = tuple(ENGINE_METHODS)
ALL_METHODS = (*REFERENCE_METHODS, *BASELINE_METHODS, *PEER_METHODS, *ENGINE_MODES)
# --scoped by default: the engine as it is against the rest (the ablations only when asked for).
SCOPED_METHODS = (*REFERENCE_METHODS, *BASELINE_METHODS, *PEER_METHODS, "vector")
TYPE_TABLE_BUDGETS = (1000, 4000)  # per-query-type recall is shown at these (when run)

Log = Callable[[str], None]
Match = Callable[[str], str]  # what both sides of a comparison go through before it


def _exact(text: str) -> str:
    return text


# -- inputs --------------------------------------------------------------------------------------


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
    llm: Counter[str] = field(default_factory=Counter)  # the engine's LLM usage (``llm_summary``)
    fallbacks: Counter[str] = field(default_factory=Counter)  # openfable.llm's fallback counts

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
            **({"llm": llm_summary(self.llm, self.fallbacks)} if self.llm["calls"] else {}),
        }

    def add_llm_usage(self, usage: LLMUsage, fallbacks: Mapping[str, int]) -> None:
        self.llm.update(
            calls=usage.calls,
            cached_calls=usage.cached_calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        )
        self.fallbacks.update({kind: count for kind, count in fallbacks.items() if count})


def llm_summary(usage: Mapping[str, int], fallbacks: Mapping[str, int]) -> dict[str, Any]:
    """The engine's LLM calls at one budget: how many (a cache hit counts, with no tokens), the
    tokens the model read and wrote, and the fallbacks counted (``openfable.llm.Fallback``)."""
    return {
        "calls": usage["calls"],
        "cached_calls": usage["cached_calls"],
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": usage["completion_tokens"],
        "fallbacks": dict(sorted((kind, count) for kind, count in fallbacks.items() if count)),
    }


@dataclass(frozen=True)
class PreparedQuery:
    query: BenchQuery
    sentences: list[tuple[str, ...]]  # per non-blank reference
    home: list[Any]  # per reference: the doc_id holding all its sentences, None when none does
    gold_documents: frozenset[Any]  # the query's doc_ids present in the corpus
    asked: str = ""  # the text every method is asked: the query's, or its scoped rewriting
    within: Any = None  # scoped: the doc_id every method is filtered to

    @property
    def text(self) -> str:
        return self.asked or self.query.text


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
    files_path: Path | None = None,
    limit: int = 0,
    scoped: bool = False,
    time_limit_s: float = 0.0,
    skip_queries: int = 0,
    log: Log | None = None,
) -> dict[str, Any]:
    """Run the benchmark and return every number (the JSON report; ``report.format_retrieval``
    prints it). With ``files_path`` the documents are also ingested from their files and the
    methods run on both, matching on normalised text (see the module's docstring). ``limit``:
    the first documents only, and the queries about them. ``scoped``: each single-document
    query without its document's name, filtered to that document (see the module's docstring).
    ``time_limit_s``: no query of the sample is started once that many seconds of querying have
    passed; every number then covers the queries run, in sample order (a real model on a CPU
    answers a query in minutes). ``skip_queries``: start after that many queries of the sample,
    to go on from a run the time limit cut; ``bench-merge`` joins the reports into one (see
    ``fable_benchmarks.merge``). Running the same command again is no way to go on: only the
    answers that passed validation are cached, so every cut-off or invalid one is asked again,
    and a model sampling at its default temperature may answer it differently this time."""
    say: Log = log or (lambda message: None)
    _check_options(files_path=files_path, collection_slug=collection_slug, scoped=scoped)
    llm = llm_configured()
    if methods is None:
        methods = _default_methods(scoped=scoped, llm=llm)
    inputs = _read_inputs(
        docs_path, queries_path, limit=limit, max_queries=max_queries, scoped=scoped, say=say
    ).skipping(skip_queries, say=say)
    split = SentenceSplitter()
    match: Match = normalise if files_path is not None else _exact
    prepared = _prepare_all(inputs, split, match, scoped=scoped)
    collection, pk_to_doc, ingestion = collection_for(
        inputs.records, collection_slug=collection_slug, needed=methods, say=say
    )
    report: dict[str, Any] = {
        "docs": str(docs_path),
        "queries_file": str(queries_path),
        **_inputs_summary(inputs),
        "budgets": list(budgets),
        "methods": list(methods),
        "llm_configured": llm,
        **_run_summary(collection, ingestion, from_files=files_path is not None),
        **({"scoped": _scoped_summary(inputs.sampled, prepared)} if scoped else {}),
    }
    try:
        cells, latency, queries_run = _run_methods(
            prepared, methods=methods, budgets=budgets, contents=inputs.contents, collection=collection,
            pk_to_doc=pk_to_doc, match=match, say=say, time_limit_s=time_limit_s,
        )  # fmt: skip
        if queries_run < len(prepared):
            report["time_limit"] = {"seconds": time_limit_s, "queries_run": queries_run, "of": len(prepared)}
        if files_path is not None:
            report["files"] = _from_files(
                files_path, queries_path=queries_path, inputs=inputs, split=split, methods=methods,
                budgets=budgets, keep=keep, say=say,
            )  # fmt: skip
    finally:
        if collection is not None and not (collection_slug or keep):  # a throw-away one
            collection_delete(collection=collection)
            report["collection"] = None
    report["results"] = _results(cells, methods, budgets)
    report["latency_ms"] = latency
    # Per query, for digging into differences between methods (not printed).
    report["query_details"] = _query_details(prepared)
    report["per_query"] = _per_query(cells, methods, budgets)
    report["sentences_segmented"] = len(split)
    return report


def code_commit() -> str:
    """The commit of the code that measured (with "+changes" when the work tree differs from it),
    or "" outside a git checkout: reports joined by ``bench-merge`` say what each part ran."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return f"{head}+changes" if dirty else head


def _check_options(*, files_path: Path | None, collection_slug: str, scoped: bool) -> None:
    if files_path is not None and collection_slug:
        raise BenchInputError("--files ingests the files now: leave out --collection")
    if files_path is not None and scoped:
        raise BenchInputError("--scoped runs on the text documents: leave out --files")


def _default_methods(*, scoped: bool, llm: bool) -> list[str]:
    """Scoped: the engine as it is against the rest; else every method (the LLM's with one)."""
    if scoped:
        return list(SCOPED_METHODS)
    return [method for method in ALL_METHODS if llm or method not in ("bipath", "llm")]


@dataclass(frozen=True)
class _Inputs:
    """The documents read, and the queries asked of them."""

    records: list[DatasetDocument]
    all_queries: list[BenchQuery]  # about the documents read
    answerable: list[BenchQuery]  # of those, the ones with references
    sampled: int  # how many of those were sampled (``max_queries``)
    queries: list[BenchQuery]  # the ones asked: the sample, single-document only when scoped
    skipped: int = 0  # how many of the sample were not asked (``skip_queries``)

    @cached_property
    def contents(self) -> dict[Any, str]:
        return {record.doc_id: record.content for record in self.records}

    def skipping(self, count: int, *, say: Log) -> _Inputs:
        """The same inputs, asking the queries after the first ``count`` of the sample only."""
        if not count:
            return self
        if count >= len(self.queries):
            raise BenchInputError(f"--skip-queries {count} leaves none of the {len(self.queries)} queries")
        say(f"--skip-queries: the first {count} of the {len(self.queries)} queries are not asked")
        return replace(self, queries=self.queries[count:], skipped=count)


def _read_inputs(
    docs_path: Path, queries_path: Path, *, limit: int, max_queries: int, scoped: bool, say: Log
) -> _Inputs:
    records = read_documents(docs_path, limit)
    all_queries = read_queries(queries_path)
    if limit:  # the queries about the documents read, only
        all_queries = _about(all_queries, records)
    answerable = [query for query in all_queries if query.references]
    queries = stratified_sample(answerable, max_queries)
    say(f"{len(queries)} queries with references ({len(all_queries) - len(answerable)} without, skipped)")
    sampled = len(queries)
    inputs = _Inputs(records, all_queries, answerable, sampled, queries)
    if not scoped:
        return inputs
    single = [query for query in queries if _single_document(query, inputs.contents)]
    say(f"--scoped: {len(single)} single-document queries ({sampled - len(single)} left out)")
    return replace(inputs, queries=single)


def _about(queries: Sequence[BenchQuery], records: Sequence[DatasetDocument]) -> list[BenchQuery]:
    """The queries whose documents are all among ``records``."""
    known = {record.doc_id for record in records}
    return [query for query in queries if set(query.doc_ids) <= known]


def _single_document(query: BenchQuery, contents: dict[Any, str]) -> bool:
    return len(query.doc_ids) == 1 and query.doc_ids[0] in contents


def _inputs_summary(inputs: _Inputs) -> dict[str, Any]:
    return {
        "documents": len(inputs.records),
        "queries": len(inputs.queries),
        "queries_without_references": len(inputs.all_queries) - len(inputs.answerable),
        "query_types": dict(sorted(Counter(query.query_type for query in inputs.queries).items())),
        **({"skipped_queries": inputs.skipped} if inputs.skipped else {}),
    }


def _prepare_all(
    inputs: _Inputs, split: SentenceSplitter, match: Match, *, scoped: bool
) -> list[PreparedQuery]:
    matched = _matched(inputs.contents, match)
    prepared = [_prepare(query, split, matched, match) for query in inputs.queries]
    return _scoped(prepared, inputs.records) if scoped else prepared


def _run_summary(
    collection: Collection | None, ingestion: dict[str, Any], *, from_files: bool
) -> dict[str, Any]:
    return {
        "collection": collection.slug if collection is not None else None,
        "ingestion": ingestion,
        "matching": "normalised" if from_files else "exact",
        "commit": code_commit(),
    }


def _scoped(prepared: list[PreparedQuery], records: Sequence[DatasetDocument]) -> list[PreparedQuery]:
    """Each query asked without its document's names, filtered to that document."""
    names = {
        record.doc_id: document_names(domain=record.domain, title=record.title, content=record.content)
        for record in records
    }
    return [
        replace(item, asked=scoped_query(item.query.text, names[item.query.doc_ids[0]]),
                within=item.query.doc_ids[0])
        for item in prepared
    ]  # fmt: skip


def _scoped_summary(sampled: int, prepared: Sequence[PreparedQuery]) -> dict[str, int]:
    return {
        "sampled": sampled,
        "queries": len(prepared),
        "multi_document_left_out": sampled - len(prepared),
        "rewritten": sum(item.text != item.query.text for item in prepared),
    }


def _results(
    cells: dict[tuple[str, int], Cell], methods: Sequence[str], budgets: Sequence[int]
) -> dict[str, dict[str, Any]]:
    return {
        method: {str(budget): cells[method, budget].summary() for budget in budgets} for method in methods
    }


def _per_query(
    cells: dict[tuple[str, int], Cell], methods: Sequence[str], budgets: Sequence[int]
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Each method's outcome per query (``ceiling``'s is the same for every method: left out)."""
    return {
        method: {str(budget): cells[method, budget].per_query for budget in budgets}
        for method in methods
        if method != "ceiling"
    }


def _query_details(prepared: Sequence[PreparedQuery]) -> dict[str, dict[str, Any]]:
    return {
        str(item.query.query_id): {
            "type": item.query.query_type,
            "doc_ids": list(item.query.doc_ids),
            **({"asked": item.text} if item.text != item.query.text else {}),
        }
        for item in prepared
    }


def _prepare(
    query: BenchQuery, split: SentenceSplitter, contents: dict[Any, str], match: Match = _exact
) -> PreparedQuery:
    """The query's reference sentences through ``match``; ``contents`` went through it already."""
    sentences = _matched_references(query, split, match)
    gold = [doc for doc in query.doc_ids if doc in contents]
    search_order = gold + [doc for doc in contents if doc not in gold]
    home = [_home(reference, search_order, contents) for reference in sentences]
    return PreparedQuery(query, sentences, home, frozenset(gold))


def _matched_references(query: BenchQuery, split: SentenceSplitter, match: Match) -> list[tuple[str, ...]]:
    """Each reference's sentences through ``match``, the ones left blank dropped (and the
    references left with none)."""
    references = (
        tuple(m for m in (match(s) for s in reference) if m)
        for reference in reference_sentences(query.references, split)
    )
    return [reference for reference in references if reference]


def _home(reference: tuple[str, ...], search_order: Sequence[Any], contents: dict[Any, str]) -> Any:
    """The first document (gold ones first) holding every sentence of the reference; None if none."""
    return next((doc for doc in search_order if all(s in contents[doc] for s in reference)), None)


def _matched(contents: dict[Any, str], match: Match) -> dict[Any, str]:
    return contents if match is _exact else {doc: match(text) for doc, text in contents.items()}


# -- from files ----------------------------------------------------------------------------------


def _from_files(
    files_path: Path,
    *,
    queries_path: Path,
    inputs: _Inputs,
    split: SentenceSplitter,
    methods: Sequence[str],
    budgets: Sequence[int],
    keep: bool,
    say: Log,
) -> dict[str, Any]:
    """The same queries over the documents uploaded as files: ingestion through the product's
    upload path, the extraction ceiling, and every method that needs no flat chunks; and the
    text documents' own extraction ceiling, to compare."""
    titles = {record.doc_id: record.title for record in inputs.records}
    items = [item for item in read_file_documents(files_path, titles=titles) if item.doc_id in titles]
    methods = [method for method in methods if method not in (*BASELINE_METHODS, *baselines.PEERS)]
    say(f"files: uploading {len(items)} files from {files_path}")
    collection, pk_to_doc, ingestion = _ingest(items, say)
    out: dict[str, Any] = {"files": str(files_path), "documents": len(items), "methods": methods}
    try:
        out["ingestion"] = ingestion
        out |= _over_files(
            files_path, queries_path=queries_path, inputs=inputs, split=split, methods=methods,
            budgets=budgets, collection=collection, pk_to_doc=pk_to_doc, say=say,
        )  # fmt: skip
        out["collection"] = collection.slug if keep else None
    finally:
        if not keep:
            collection_delete(collection=collection)
    out["text_extraction_ceiling"] = _extraction_ceiling(inputs.answerable, inputs.contents, split)
    return out


def _over_files(
    files_path: Path,
    *,
    queries_path: Path,
    inputs: _Inputs,
    split: SentenceSplitter,
    methods: Sequence[str],
    budgets: Sequence[int],
    collection: Collection,
    pk_to_doc: dict[int, Any],
    say: Log,
) -> dict[str, Any]:
    """The extraction ceiling of the uploaded files, the extractor alone, and the methods over them."""
    stored = document_list(user=None, collection=collection).values_list("pk", "content")
    extracted = {pk_to_doc[pk]: content for pk, content in stored if pk in pk_to_doc}
    ceiling = _extraction_ceiling(inputs.answerable, extracted, split)
    say(f"files: extraction ceiling {ceiling['share']:.1%}")
    # The extractor alone, in a fresh process: its pages per second and peak memory.
    (row,) = bench_extract(files_path=files_path, queries_path=queries_path, candidates=["pypdfium2+clean"])
    matched = _matched(extracted, normalise)
    prepared = [_prepare(item, split, matched, normalise) for item in inputs.queries]
    cells, latency, _queries_run = _run_methods(
        prepared, methods=methods, budgets=budgets, contents=extracted, collection=collection,
        pk_to_doc=pk_to_doc, match=normalise, say=say,
    )  # fmt: skip
    return {
        "extraction_ceiling": ceiling,
        "extractor": row.as_json(),
        "results": _results(cells, methods, budgets),
        "latency_ms": latency,
        "per_query": _per_query(cells, methods, budgets),
    }


def _extraction_ceiling(
    queries: Sequence[BenchQuery], texts: dict[Any, str], split: SentenceSplitter
) -> dict[str, Any]:
    """The share of the gold references whose every sentence is in their own document's text,
    both normalised (as ``bench-extract`` counts it); the ones missed, to look at."""
    matched = _matched(texts, normalise)
    found = 0
    missed: list[dict[str, Any]] = []
    references = 0
    for query in queries:
        if not query.doc_ids:
            continue
        home = matched.get(query.doc_ids[0], "")
        for sentences in reference_sentences(query.references, split):
            references += 1
            absent = [s for s in sentences if normalise(s) not in home]
            if absent:
                missed.append({"query_id": query.query_id, "doc_id": query.doc_ids[0], "absent": absent})
            else:
                found += 1
    return {
        "found": found,
        "references": references,
        "share": round(found / references, 4) if references else 0.0,
        "missed": missed,
    }


def collection_for(
    records: Sequence[DatasetDocument], *, collection_slug: str, needed: Sequence[str], say: Log
) -> tuple[Collection | None, dict[int, Any], dict[str, Any]]:
    """The collection to query (ingested now, or reused) and its document pk -> doc_id map."""
    if collection_slug:
        return _reused(records, collection_slug, say)
    if not any(method in needed for method in ("oracle", PARENT_CHILD, *ENGINE_MODES)):
        return None, {}, {"skipped": "no method needs the engine"}
    return _ingest(records, say)


def _reused(
    records: Sequence[DatasetDocument], collection_slug: str, say: Log
) -> tuple[Collection, dict[int, Any], dict[str, Any]]:
    """An existing collection, its documents matched to doc_ids through ``metadata["doc_id"]``
    (stored at ingestion), or else through their content."""
    try:
        collection = collection_get(user=None, collection=collection_slug)
    except NotFoundError:
        raise BenchInputError(f"--collection {collection_slug}: no such collection") from None
    by_hash = {_sha256(record.content): record.doc_id for record in records}
    known = {record.doc_id for record in records}
    pk_to_doc: dict[int, Any] = {}
    stored = document_list(user=None, collection=collection).values_list("pk", "metadata", "content_hash")
    for pk, metadata, content_hash in stored:
        doc_id = (metadata or {}).get("doc_id")
        pk_to_doc[pk] = doc_id if doc_id in known else by_hash.get(content_hash)
    missing = len(known - set(pk_to_doc.values()))
    if missing:
        say(f"warning: {missing} of the {len(known)} documents are not in collection {collection_slug}")
    return collection, pk_to_doc, {"reused": True, "documents": len(pk_to_doc), "missing": missing}


def _ingest(
    records: Sequence[DatasetDocument], say: Log
) -> tuple[Collection, dict[int, Any], dict[str, Any]]:
    collection = collection_create(name=f"bench-retrieval {uuid.uuid4().hex[:8]}")
    # Recall, not ingestion speed, is measured here: passages embedded by an earlier run are reused.
    embedder = CachedPassageEmbedder(
        get_embedder(), Path(settings.DATA_DIR) / "bench-cache" / "passages.sqlite3"
    )
    pk_to_doc: dict[int, Any] = {}
    failed = pages = 0
    extract_s = 0.0
    started = time.perf_counter()
    try:
        for number, record in enumerate(records, 1):
            indexed = index_dataset_document(collection=collection, item=record, embedder=embedder)
            pk_to_doc[indexed.document.pk] = record.doc_id
            if record.file is not None:
                extract_s += (indexed.timings or {}).get("extract", 0.0)
                pages += page_count(indexed.document)
            if indexed.error is not None:  # counted and shown; the benchmark goes on without it
                failed += 1
                say(f"FAILED {record.doc_id}: {indexed.error}")
            if number % 10 == 0 or number == len(records):
                say(f"ingested {number}/{len(records)} documents ({time.perf_counter() - started:.0f} s)")
    except BaseException:
        collection_delete(collection=collection)
        raise
    finally:
        embedder.close()
    seconds = round(time.perf_counter() - started, 1)
    say(f"passage cache: {embedder.hits} reused, {embedder.misses} embedded")
    ingestion: dict[str, Any] = {
        "reused": False,
        "documents": len(records),
        "failed": failed,
        "seconds": seconds,
    }
    if pages:
        # The job's extraction stage: a fresh child process per file, reading it whole.
        ingestion |= {
            "pages": pages,
            "extract_seconds": round(extract_s, 1),
            "pages_per_second": round(pages / extract_s, 1) if extract_s else 0.0,
        }
    return collection, pk_to_doc, ingestion


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


Order = Sequence[int] | np.ndarray
Ranked = ChunkIndex | ParentChild


@dataclass(frozen=True)
class _Corpus:
    """What the reference methods compare against, made once per run (through ``match``)."""

    contents: dict[Any, str]
    matched: dict[Any, str]
    document_tokens: dict[Any, int]  # only when ``ceiling`` runs
    leaves: list[tuple[Any, str, int]]  # (doc_id, text, tokens), only when ``oracle`` runs

    @property
    def corpus_tokens(self) -> int:
        return sum(self.document_tokens.values())


def _corpus_for(
    methods: Sequence[str],
    contents: dict[Any, str],
    collection: Collection | None,
    pk_to_doc: dict[int, Any],
    match: Match,
) -> _Corpus:
    matched = _matched(contents, match)
    document_tokens = (
        {doc: count_tokens(text) for doc, text in matched.items()} if "ceiling" in methods else {}
    )
    leaves = (
        [(doc, match(text), tokens) for doc, text, tokens in _leaves(collection, pk_to_doc)]
        if "oracle" in methods
        else []
    )
    return _Corpus(contents, matched, document_tokens, leaves)


@dataclass(frozen=True)
class _Rankers:
    """The flat baselines and the peers, indexed once per run, and every query's vector."""

    query_vectors: np.ndarray | None
    flat: ChunkIndex | None
    peers: dict[str, ChunkIndex]
    parent_child: ParentChild | None


def _rankers_for(
    prepared: Sequence[PreparedQuery],
    *,
    methods: Sequence[str],
    contents: dict[Any, str],
    collection: Collection | None,
    pk_to_doc: dict[int, Any],
    say: Log,
) -> _Rankers:
    cache_dir = Path(settings.DATA_DIR) / "bench-cache"
    needs_vectors = any(m in methods for m in ("dense", *PEER_METHODS))
    embedder = get_embedder() if needs_vectors else None
    query_vectors = (
        baselines.cached_embeddings(
            embedder, [item.text for item in prepared], kind="query", cache_dir=cache_dir, log=say
        )
        if embedder is not None
        else None
    )
    chunks = _ChunkIndexer(contents, embedder, cache_dir, say)
    flat = None
    if any(method in methods for method in BASELINE_METHODS):
        flat = chunks.index(baselines.CHUNK_TOKENS, 0, lexical="bm25" in methods, dense="dense" in methods)
    peers = {
        name: chunks.index(peer.chunk_tokens, peer.overlap_tokens, lexical=True, dense=True)
        for name, peer in baselines.PEERS.items()
        if name in methods
    }
    parent_child = (
        _parent_child(collection, pk_to_doc, embedder=embedder) if PARENT_CHILD in methods else None
    )
    return _Rankers(query_vectors, flat, peers, parent_child)


@dataclass(frozen=True)
class _ChunkIndexer:
    """Flat chunk indexes over the documents, their passage vectors from the cache when there."""

    contents: dict[Any, str]
    embedder: Any
    cache_dir: Path
    say: Log

    def index(self, size: int, overlap: int, *, lexical: bool, dense: bool) -> ChunkIndex:
        chunks = baselines.chunk_documents(self.contents.items(), size, overlap)
        self.say(f"{len(chunks)} chunks of <= {size} tokens, {overlap} overlapping")
        texts = [chunk.text for chunk in chunks]
        vectors = None
        if dense and self.embedder is not None:
            vectors = baselines.cached_embeddings(
                self.embedder, texts, kind="passage", cache_dir=self.cache_dir, log=self.say
            )
        return ChunkIndex(
            texts=texts, owners=[chunk.document for chunk in chunks],
            token_counts=[chunk.token_count for chunk in chunks], vectors=vectors, lexical=lexical,
        )  # fmt: skip


def _packed(index: Ranked, order: Order, budgets: Sequence[int]) -> dict[int, Retrieved]:
    """What packing ``order`` gives at each budget."""
    items = index.items if isinstance(index, ParentChild) else index
    inside = index.items.inside if isinstance(index, ParentChild) else None
    out = {}
    for budget in budgets:
        picked = baselines.pack_ranked(order, items.token_counts, budget, inside=inside)
        out[budget] = Retrieved(
            [items.texts[i] for i in picked],
            {items.owners[i] for i in picked},
            sum(items.token_counts[i] for i in picked),
        )
    return out


@dataclass
class _MethodRun:
    """Every method over the queries, one query at a time: the cells it fills, and the latencies
    of the ranking methods and of the engine's modes (whole, and per server stage)."""

    methods: Sequence[str]
    budgets: Sequence[int]
    corpus: _Corpus
    rankers: _Rankers
    collection: Collection | None
    pk_to_doc: dict[int, Any]
    say: Log
    match: Match
    cells: dict[tuple[str, int], Cell] = field(default_factory=lambda: defaultdict(Cell))
    timings: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    stages: dict[str, dict[str, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )

    @property
    def engine_modes(self) -> list[str]:
        return [method for method in self.methods if method in ENGINE_MODES]

    def score(self, item: PreparedQuery, vector: np.ndarray | None) -> None:
        if "ceiling" in self.methods:
            self._ceiling(item)
        if "oracle" in self.methods:
            self._oracle(item)
        for name, (index, order) in self._orders(item, vector).items():
            for budget, retrieved in _packed(index, order, self.budgets).items():
                _record(self.cells[name, budget], item, retrieved, self.match)
        for mode in self.engine_modes:
            for budget in self.budgets:
                self._engine(item, mode, budget)

    def latency(self) -> dict[str, Any]:
        latency: dict[str, Any] = {name: _percentiles(values) for name, values in self.timings.items()}
        for mode, by_stage in self.stages.items():
            latency[f"{mode} (server stages)"] = {
                stage: _percentiles(values) for stage, values in by_stage.items()
            }
        return latency

    def _ceiling(self, item: PreparedQuery) -> None:
        corpus, within = self.corpus, item.within
        if within is None:
            whole = Retrieved(list(corpus.matched.values()), set(corpus.contents), corpus.corpus_tokens)
        else:
            whole = Retrieved([corpus.matched[within]], {within}, corpus.document_tokens[within])
        whole_score = score_sentences(item.sentences, whole.texts)  # the same at every budget
        for budget in self.budgets:
            _record(self.cells["ceiling", budget], item, whole, score=whole_score)

    def _oracle(self, item: PreparedQuery) -> None:
        useful = [leaf for leaf in self.corpus.leaves if _holds_a_reference(leaf, item)]
        useful.sort(key=lambda leaf: leaf[2])
        sizes = [leaf[2] for leaf in useful]
        for budget in self.budgets:
            picked = [useful[index] for index in baselines.pack_ranked(range(len(useful)), sizes, budget)]
            _record(
                self.cells["oracle", budget],
                item,
                Retrieved([p[1] for p in picked], {p[0] for p in picked}, sum(p[2] for p in picked)),
            )

    def _orders(self, item: PreparedQuery, vector: np.ndarray | None) -> dict[str, tuple[Ranked, Order]]:
        """Each ranking method's order for the query, each timed as ``"<method> (rank)"``."""
        orders: dict[str, tuple[Ranked, Order]] = {}
        for name, index, rank in self._rankings(item, vector):
            tick = time.perf_counter()
            orders[name] = (index, rank())
            self.timings[f"{name} (rank)"].append((time.perf_counter() - tick) * 1000)
        return orders

    def _rankings(
        self, item: PreparedQuery, vector: np.ndarray | None
    ) -> list[tuple[str, Ranked, Callable[[], Order]]]:
        """(method, its index, how it ranks this query) for the ranking methods that run; the
        ones that need the query's vector only when there is one."""
        flat, text, within = self.rankers.flat, item.text, item.within
        rankings: list[tuple[str, Ranked, Callable[[], Order]]] = []
        if flat is not None and "bm25" in self.methods:
            rankings.append(("bm25", flat, lambda: flat.bm25_order(text, within)))
        if vector is None:
            return rankings
        if flat is not None and "dense" in self.methods:
            rankings.append(("dense", flat, lambda: flat.dense_order(vector, within)))
        for name, peer in self.rankers.peers.items():
            rankings.append((name, peer, partial(peer.hybrid_order, text, vector, within)))
        parent_child = self.rankers.parent_child
        if parent_child is not None:
            rankings.append((PARENT_CHILD, parent_child, partial(parent_child.order, text, vector, within)))
        return rankings

    def _engine(self, item: PreparedQuery, mode: str, budget: int) -> None:
        cell = self.cells[mode, budget]
        tick = time.perf_counter()
        before = fallback_counts()
        try:
            result = _engine_retrieve(
                item.text, budget, mode, self.collection, documents=self._documents(item.within)
            )
        except RetrievalInputError as error:  # counted, scored as nothing found
            cell.add_llm_usage(LLMUsage(), counts_since(before))
            cell.errors += 1
            self.say(f"{mode} query {item.query.query_id} at {budget}: {error}")
            _record(cell, item, Retrieved([], set(), 0))
            return
        self.timings[mode].append((time.perf_counter() - tick) * 1000)
        for stage, ms in result.timings_ms.items():
            self.stages[mode][stage].append(float(ms))
        cell.routing[str(result.routing)] += 1
        cell.add_llm_usage(result.llm_usage, counts_since(before))
        retrieved = Retrieved(
            [chunk.text for chunk in result.chunks],
            {self.pk_to_doc.get(chunk.document_id) for chunk in result.chunks},
            int(result.total_tokens),
        )
        _record(cell, item, retrieved, self.match)

    def _documents(self, within: Any) -> list[int] | None:
        """The engine's filter for a scoped query: its document's pk."""
        return [self._doc_to_pk[within]] if within is not None else None

    @cached_property
    def _doc_to_pk(self) -> dict[Any, int]:
        return {doc: pk for pk, doc in self.pk_to_doc.items() if doc is not None}


def _holds_a_reference(leaf: tuple[Any, str, int], item: PreparedQuery) -> bool:
    """Whether the leaf is in the query's scope and holds one of its reference sentences."""
    if item.within is not None and leaf[0] != item.within:
        return False
    return any(s in leaf[1] for reference in item.sentences for s in reference)


def _run_methods(
    prepared: Sequence[PreparedQuery],
    *,
    methods: Sequence[str],
    budgets: Sequence[int],
    contents: dict[Any, str],
    collection: Collection | None,
    pk_to_doc: dict[int, Any],
    say: Log,
    match: Match = _exact,
    time_limit_s: float = 0.0,
) -> tuple[dict[tuple[str, int], Cell], dict[str, Any], int]:
    """Every method on each query in turn: the cells, the latencies, and how many queries ran."""
    run = _MethodRun(
        methods=methods,
        budgets=budgets,
        corpus=_corpus_for(methods, contents, collection, pk_to_doc, match),
        rankers=_rankers_for(
            prepared, methods=methods, contents=contents, collection=collection, pk_to_doc=pk_to_doc, say=say
        ),
        collection=collection,
        pk_to_doc=pk_to_doc,
        say=say,
        match=match,
    )
    if run.engine_modes:
        get_embedder().embed_query("warm up")  # the model's load time is not query latency
    vectors = run.rankers.query_vectors
    started = time.perf_counter()
    number = 0
    for number, item in enumerate(prepared, 1):
        run.score(item, vectors[number - 1] if vectors is not None else None)
        elapsed = time.perf_counter() - started
        if number % 25 == 0 or number == len(prepared):
            say(f"queries {number}/{len(prepared)} ({elapsed:.0f} s)")
        if time_limit_s and elapsed >= time_limit_s and number < len(prepared):
            say(f"time limit: {number} of {len(prepared)} queries run ({elapsed:.0f} s)")
            break
    return run.cells, run.latency(), number


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "n": len(values),
    }


def _engine_retrieve(
    query: str,
    budget: int,
    method: str,
    collection: Collection | None,
    *,
    documents: Sequence[int] | None = None,
) -> RetrievalResult:
    mode, changes = ENGINE_METHODS[method]
    return retrieve(
        query=query,
        token_budget=budget,
        mode=mode,
        collection=collection.slug if collection is not None else None,
        documents=documents,
        use_cache=False,  # a benchmark measures the engine, not the cache
        query_settings=replace(QuerySettings.from_settings(), **changes),
    )


def _leaves(collection: Collection | None, pk_to_doc: dict[int, Any]) -> list[tuple[Any, str, int]]:
    """(doc_id, text, tokens) of every leaf of the collection, documents in id order."""
    if collection is None:
        return []
    leaves = []
    for document in document_list(user=None, collection=collection).order_by("pk"):
        rows = document_nodes(document=document).filter(kind=LEAF).values_list("content", "token_count")
        leaves += [
            (pk_to_doc.get(document.pk), content, tokens or count_tokens(content)) for content, tokens in rows
        ]
    return leaves


def _parent_child(collection: Collection | None, pk_to_doc: dict[int, Any], *, embedder: Any) -> ParentChild:
    """``parent-child`` over the collection's tree: its leaves with the vectors the engine stored
    for them (the same model), each leaf's parent section (None under the root) as its text."""
    tree = _TreeLeaves(int(embedder.dimensions) if embedder is not None else 0)
    for document in document_list(user=None, collection=collection).order_by("pk") if collection else []:
        tree.add(document, pk_to_doc.get(document.pk))
    return tree.parent_child()


@dataclass
class _TreeLeaves:
    """The leaves of a collection's documents, gathered for ``parent-child``: each leaf's text,
    owner, tokens and vector, and the place of its parent section in ``parents``."""

    dimensions: int
    texts: list[str] = field(default_factory=list)
    owners: list[Any] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    vectors: list[np.ndarray] = field(default_factory=list)
    parent_of: list[int | None] = field(default_factory=list)
    parents: list[tuple[str, int]] = field(default_factory=list)

    def add(self, document: Any, owner: Any) -> None:
        nodes = list(
            document_nodes(document=document).values_list(
                "pk", "parent_id", "kind", "start_char", "end_char", "content", "token_count", "embedding"
            )
        )
        spans = {pk: (kind, start, end) for pk, _, kind, start, end, *_ in nodes}
        place: dict[int, int] = {}  # parent node pk -> its place in ``parents``
        for _, parent, kind, _, _, content, count, embedding in nodes:
            if kind != LEAF:
                continue
            if parent is not None and spans[parent][0] != ROOT and parent not in place:
                _kind, start, end = spans[parent]
                text = document.content[start:end]
                place[parent] = len(self.parents)
                self.parents.append((text, count_tokens(text)))
            self.texts.append(content)
            self.owners.append(owner)
            self.tokens.append(count or count_tokens(content))
            self.vectors.append(self._vector(embedding))
            self.parent_of.append(place.get(parent) if parent is not None else None)

    def _vector(self, embedding: Any) -> np.ndarray:
        """The stored vector; zeros for a leaf stored without one."""
        if embedding is None:
            return np.zeros(self.dimensions, dtype=np.float32)
        return np.asarray(embedding, dtype=np.float32)

    def parent_child(self) -> ParentChild:
        matrix = np.stack(self.vectors) if self.vectors else np.zeros((0, self.dimensions), dtype=np.float32)
        leaves = ChunkIndex(texts=self.texts, owners=self.owners, token_counts=self.tokens, vectors=matrix)
        return ParentChild(leaves, self.parent_of, self.parents)


def _record(
    cell: Cell,
    item: PreparedQuery,
    retrieved: Retrieved,
    match: Match = _exact,
    *,
    score: QueryScore | None = None,
) -> None:
    score = score or score_sentences(item.sentences, [match(text) for text in retrieved.texts])
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
