"""What the benchmarks print and write: markdown tables on stdout, every number as JSON.

One module for the three commands, so their tables share one shape (``markdown_table``), one
way to show a share as a percentage and a budget as "1K", and one JSON writer. The numbers
themselves come from ``ingest``, ``retrieval`` and ``latency``; nothing here measures.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fable_benchmarks.ingest import IngestBenchRow
from fable_benchmarks.large_document import LargeDocumentRow
from fable_benchmarks.retrieval import (
    BASELINE_METHODS,
    ENGINE_MODES,
    PEER_METHODS,
    REFERENCE_METHODS,
    TYPE_TABLE_BUDGETS,
)


def write_json(report: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(report, indent=2, default=str))


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def percent(value: float) -> str:
    """A share (0.123) as the tables show it: "12.3"."""
    return f"{100 * value:.1f}"


def budget_label(budget: int) -> str:
    return f"{budget // 1000}K" if budget % 1000 == 0 else str(budget)


# -- bench-ingest --------------------------------------------------------------------------------

INGEST_HEADER = (
    "dataset", "docs", "failed", "nodes", "pipeline s", "docs/min", "nodes/s", "pages", "extract s",
    "build s", "embed s",
    "save s", "embed share", "bare embedding s", "pipeline / bare", "document tokens",
    "tokens embedded", "embedded / document", "one pass s", "job / one pass", "estimate swing",
    "peak RSS MB",
)  # fmt: skip


def format_ingest(rows: Sequence[IngestBenchRow]) -> str:
    lines = []
    for row in rows:
        derived = row.derived()
        lines.append([
            row.dataset, str(row.documents), str(row.failed), str(row.nodes), f"{row.pipeline_s:.1f}",
            f"{derived['docs_per_minute']:.1f}", f"{derived['nodes_per_second']:.1f}", str(row.pages or "–"),
            f"{row.extract_s:.1f}", f"{row.build_s:.1f}",
            f"{row.embed_s:.1f}", f"{row.save_s:.1f}", f"{derived['embed_share']:.0%}",
            f"{row.baseline_embed_s:.1f}", f"{derived['overhead']:.2f}x", f"{row.document_tokens:,}",
            f"{row.embedded_tokens:,}", f"{derived['embedded_per_document_token']:.2f}x",
            f"{row.one_pass_s:.1f}", f"{derived['job_per_one_pass']:.2f}x", f"{row.estimate_swing:.2f}x",
            f"{row.peak_rss_mb:.0f}",
        ])  # fmt: skip
    return "\n".join(markdown_table(INGEST_HEADER, lines))


LARGE_HEADER = (
    "bytes", "tokens", "nodes", "status", "minutes", "build s", "builder alone s", "embed s", "save s",
    "builder µs/token", "model µs/token", "longest heartbeat gap s (stage)", "RSS before MB", "peak RSS MB",
)  # fmt: skip


def format_large_document(rows: Sequence[LargeDocumentRow]) -> str:
    lines = [
        [
            f"{row.document_bytes:,}", f"{row.tokens:,}", f"{row.nodes:,}", row.status, f"{row.minutes:.1f}",
            f"{row.build_s:.1f}", f"{row.builder_s:.1f}", f"{row.embed_s:.1f}", f"{row.save_s:.1f}",
            f"{row.builder_us_per_token:.1f}", f"{row.model_us_per_token:.0f}",
            f"{row.longest_silence_s:.1f} ({row.silent_stage})", f"{row.rss_before_mb:.0f}",
            f"{row.peak_rss_mb:.0f}",
        ]
        for row in rows
    ]  # fmt: skip
    return "\n".join(markdown_table(LARGE_HEADER, lines))


# -- bench-retrieval -----------------------------------------------------------------------------


def format_retrieval(report: dict[str, Any]) -> str:
    budgets = [str(budget) for budget in report["budgets"]]
    labels = [budget_label(budget) for budget in report["budgets"]]
    results = report["results"]
    lines = _format_intro(report)
    for title, cell_text in _SHARE_TABLES:
        lines += _method_table(title, results, budgets, labels, cell_text)
    lines += _format_margins(results, budgets, labels)
    lines += _method_table("Tokens returned (mean)", results, budgets, labels, _mean_tokens)
    lines += _format_outcomes(results, budgets, labels)
    lines += _format_llm(results, budgets, labels)
    lines += _format_by_type(report, budgets)
    if report.get("files"):
        lines += _format_files(report, budgets, labels)
    lines += _format_latency(report.get("latency_ms") or {})
    return "\n".join(lines).rstrip() + "\n"


def _merged_line(parts: list[dict[str, Any]]) -> str:
    """Which queries of the sample each joined report ran, and on which commit."""
    spans = []
    for part in parts:
        first = part["skipped_queries"] + 1
        commit = part["commit"] or "commit unknown"
        spans.append(f"{first}-{first + part['queries_run'] - 1} ({part['file']}, {commit})")
    return (
        f"Joined from {len(parts)} runs over parts of one sample (bench-merge): queries "
        + ", ".join(spans)
        + ". Query latency is each run's own: see their reports."
    )


CellText = Callable[[dict[str, Any]], str]  # one method's summary at one budget -> a table cell

_SHARE_TABLES: tuple[tuple[str, CellText], ...] = (
    ("Recall (%)", lambda cell: percent(cell["recall"])),
    ("EIR (%)", lambda cell: percent(cell["eir"])),
    (
        "Right document found (% of the query's gold documents with a chunk returned)",
        lambda cell: percent(cell["doc_found"]),
    ),
)


def _mean_tokens(cell: dict[str, Any]) -> str:
    return f"{cell['mean_tokens']:.0f}"


def _format_intro(report: dict[str, Any]) -> list[str]:
    lines = [
        f"bench-retrieval: {report['documents']} documents, {report['queries']} queries with references "
        f"({report['queries_without_references']} without references skipped); budgets in cl100k tokens.",
        "",
    ]
    if limited := report.get("time_limit"):
        lines += [
            f"Time limit of {limited['seconds']:.0f} s: the first {limited['queries_run']} of the "
            f"{limited['of']} sampled queries were run; every number below is theirs.",
            "",
        ]
    if skipped := report.get("skipped_queries"):
        lines += [f"The first {skipped} queries of the sample were skipped (--skip-queries).", ""]
    if merged := report.get("merged"):
        lines += [_merged_line(merged), ""]
    if scoped := report.get("scoped"):
        lines += [
            f"Scoped: each single-document query without its document's name, filtered to that document; "
            f"{scoped['queries']} of the {scoped['sampled']} sampled queries "
            f"({scoped['multi_document_left_out']} multi-document ones left out), {scoped['rewritten']} rewritten.",
            "",
        ]
    return lines


def _method_table(
    title: str, results: dict[str, Any], budgets: list[str], labels: list[str], cell_text: CellText
) -> list[str]:
    """One row per method, one column per budget."""
    rows = [[method] + [cell_text(results[method][b]) for b in budgets] for method in results]
    return [f"### {title}", "", *markdown_table(["method", *labels], rows), ""]


OUTCOMES = ("recalled", "unmatchable", "wrong_document", "wrong_passage")
OUTCOMES_HEADER = (
    "method", "budget", "recalled", "unmatchable", "wrong document", "wrong passage", "whole-document routing %",
)  # fmt: skip


def _format_outcomes(results: dict[str, Any], budgets: list[str], labels: list[str]) -> list[str]:
    """Where each ranking method's references went, per budget (the reference methods rank nothing)."""
    ranked = [m for m in results if m not in REFERENCE_METHODS]
    if not ranked:
        return []
    lines = [
        "### Where references go (% of references): recalled / never exact anywhere / "
        "document not returned / document returned, passage missed",
        "",
    ]
    rows = [
        [method, label, *(percent(results[method][budget]["reference_outcomes"][k]) for k in OUTCOMES),
         _whole_document_share(results[method][budget].get("routing"))]
        for method in ranked
        for budget, label in zip(budgets, labels, strict=True)
    ]  # fmt: skip
    return [*lines, *markdown_table(OUTCOMES_HEADER, rows), ""]


LLM_HEADER = (
    "mode", "budget", "calls per query", "asked (not cached)", "prompt tokens per asked call",
    "answer tokens per asked call", "fallbacks",
)  # fmt: skip


def _format_llm(results: dict[str, Any], budgets: list[str], labels: list[str]) -> list[str]:
    """The engine modes' LLM calls per budget, where any were made (a cache hit counts as a call)."""
    rows = []
    for method, cells in results.items():
        for budget, label in zip(budgets, labels, strict=True):
            if llm := cells[budget].get("llm"):
                asked = llm["calls"] - llm["cached_calls"]
                rows.append([
                    method, label, f"{llm['calls'] / max(1, cells[budget]['queries']):.2f}", str(asked),
                    f"{llm['prompt_tokens'] / max(1, asked):.0f}", f"{llm['completion_tokens'] / max(1, asked):.0f}",
                    _fallbacks(llm["fallbacks"]),
                ])  # fmt: skip
    if not rows:
        return []
    return [
        "### LLM calls (the engine's; their time is in the server stages below)",
        "",
        *markdown_table(LLM_HEADER, rows),
        "",
    ]


def _whole_document_share(routing: dict[str, int] | None) -> str:
    """The share of the engine's queries routed to whole documents ("" for the other methods)."""
    if not routing:
        return ""
    return f"{percent(routing.get('documents', 0) / max(1, sum(routing.values())))}"


def _format_by_type(report: dict[str, Any], budgets: list[str]) -> list[str]:
    """Recall per query type at a few budgets, one column per method and budget."""
    results = report["results"]
    types = sorted({name for cells in results.values() for name in cells[budgets[0]]["recall_by_type"]})
    if not types:
        return []
    type_budgets = _type_budgets(budgets)
    ranked = [m for m in results if m != "ceiling"]
    counts = report.get("query_types", {})
    header = ["query type", "n"] + [f"{m} {budget_label(int(b))}" for b in type_budgets for m in ranked]
    rows = [
        [name, str(counts.get(name, "")), *_type_recalls(results, name, type_budgets, ranked)]
        for name in types
    ]
    return [
        f"### Recall by query type (%) at {', '.join(budget_label(int(b)) for b in type_budgets)}",
        "",
        *markdown_table(header, rows),
        "",
    ]


def _type_recalls(results: dict[str, Any], name: str, budgets: list[str], methods: list[str]) -> list[str]:
    return [percent(results[m][b]["recall_by_type"].get(name, 0.0)) for b in budgets for m in methods]


def _type_budgets(budgets: list[str]) -> list[str]:
    """``TYPE_TABLE_BUDGETS`` where run; else the first and the last budget."""
    run = [b for b in map(str, TYPE_TABLE_BUDGETS) if b in budgets]
    return run or budgets[:: max(1, len(budgets) - 1)]


def _format_latency(latency: dict[str, Any]) -> list[str]:
    """The methods' latency (those with ``p50``), then each engine mode's server stages."""
    lines = []
    plain = {name: value for name, value in latency.items() if "p50" in value}
    if plain:
        lines += ["### Query latency (ms; engine: wall time of retrieve(), all budgets together)", ""]
        rows = [[name, f"{v['p50']:.1f}", f"{v['p95']:.1f}", str(v["n"])] for name, v in plain.items()]
        lines += [*markdown_table(["method", "p50", "p95", "calls"], rows), ""]
    for name, by_stage in latency.items():
        if "p50" in by_stage:
            continue
        lines += [f"### {name} (ms)", ""]
        rows = [[stage, f"{v['p50']:.1f}", f"{v['p95']:.1f}"] for stage, v in by_stage.items()]
        lines += [*markdown_table(["stage", "p50", "p95"], rows), ""]
    return lines


def _format_margins(results: dict[str, Any], budgets: list[str], labels: list[str]) -> list[str]:
    """Each engine mode's recall against the best of the baselines and peers run, per budget."""
    peers = [m for m in results if m in (*BASELINE_METHODS, *PEER_METHODS)]
    engines = [m for m in results if m in ENGINE_MODES]
    if not peers or not engines:
        return []
    lines = ["### The engine's margin over the best peer (recall, points)", ""]
    rows = []
    for label, budget in zip(labels, budgets, strict=True):
        best = max(peers, key=lambda m: results[m][budget]["recall"])
        best_recall = results[best][budget]["recall"]
        rows.append(
            [label, f"{best} {percent(best_recall)}"]
            + [f"{100 * (results[m][budget]['recall'] - best_recall):+.1f}" for m in engines]
        )
    return [*lines, *markdown_table(["budget", "best peer", *engines], rows), ""]


def _format_files(report: dict[str, Any], budgets: list[str], labels: list[str]) -> list[str]:
    """From the files against from the text, one row pair per method, and what extraction cost."""
    files = report["files"]
    ceiling, text_ceiling = files["extraction_ceiling"], files.get("text_extraction_ceiling") or {}
    ingestion, extractor = files.get("ingestion") or {}, files.get("extractor") or {}
    lines = [
        f"### From the files ({files['files']}) against from the text (recall %, both matched on "
        "normalised text)",
        "",
        f"Extraction ceiling (gold references whose every sentence is in their document's text): files "
        f"{percent(ceiling['share'])} % ({ceiling['found']}/{ceiling['references']}), text "
        f"{percent(text_ceiling.get('share', 0.0))} %.",
        f"Upload path: {ingestion.get('pages', 0)} pages extracted in {ingestion.get('extract_seconds', 0)} s "
        f"by the jobs ({ingestion.get('pages_per_second', 0)} pages/s, a child process per file); "
        f"the extractor alone: {extractor.get('pages_per_second', 0)} pages/s, peak "
        f"{extractor.get('peak_rss_mb', 0):.0f} MB RSS ({extractor.get('added_mb', 0):.0f} MB above its "
        f"libraries); {ingestion.get('failed', 0)} files failed.",
        "",
    ]
    rows = []
    for method in files["results"]:
        if method not in report["results"]:
            continue
        text = [report["results"][method][b]["recall"] for b in budgets]
        from_files = [files["results"][method][b]["recall"] for b in budgets]
        rows.append([f"{method} (text)", *map(percent, text)])
        rows.append([f"{method} (files)", *map(percent, from_files)])
        rows.append([
            f"{method} (files − text)", *(f"{100 * (f - t):+.1f}" for f, t in zip(from_files, text, strict=True))
        ])  # fmt: skip
    return [*lines, *markdown_table(["method", *labels], rows), ""]


# -- bench-latency -------------------------------------------------------------------------------


# Absolute times differ by 1.5-2.5x between machines; a latency over the query embedding's own p50
# measured in the same run does not (issue 24's target: vector mode at most 2x the embedding).
EMBEDDING_RATIO = "x embedding p50 (p50 / p95)"


def _ratio_pair(times: dict[str, Any], per_embedding: float) -> str:
    """p50 and p95 over the query embedding's p50 ("-" when that is 0)."""
    if per_embedding <= 0:
        return "-"
    return f"{times['p50'] / per_embedding:.2f} / {times['p95'] / per_embedding:.2f}"


def format_latency(report: dict[str, Any]) -> str:
    corpus = report.get("corpus", {})
    load = report.get("load", {})
    lines = [
        f"bench-latency: {corpus.get('collection_nodes', '?')} synthetic nodes in "
        f"{corpus.get('collection_documents', '?')} documents "
        f"({corpus.get('table_nodes', '?')} nodes in the table), "
        f"{report['queries']} queries, budget {report['budget']}, top-K {report['top_k']}.",
        "",
    ]
    server, wall = report["vector_server"], report["vector_wall"]
    bare, default = report["bare_topk"], report["bare_topk_default_ef"]
    target = "met" if report["meets_target"] else "NOT met"
    with_embedding, embedding = report["vector_server_with_embedding"], report["query_embedding"]
    target_with_embedding = "met" if report["meets_target_with_embedding"] else "NOT met"
    measures = [
        (
            "vector mode, server-side (timings_ms.total)", server,
            f"strategy {', '.join(report['vector_strategy'])}; "
            f"target p50 <= {report['target_p50_ms']:.0f} ms: {target}",
        ),
        (
            "vector mode, server-side + the query text's real embedding", with_embedding,
            f"embedding alone {embedding['p50']:.1f} / {embedding['p95']:.1f}; target p50 <= "
            f"{report['target_with_embedding_p50_ms']:.0f} ms: {target_with_embedding}",
        ),
        (
            "vector mode, wall time of retrieve()", wall,
            f"query text: {report['query_words']} words of a random leaf (lexical path)",
        ),
        (
            f"bare pgvector top-K, ef_search {bare['ef_search']}", bare,
            f"vector / bare p50 = {report['ratio_p50']}x; uses HNSW: {report['bare_uses_hnsw']}; "
            f"recall@K vs exact: {report['hnsw_recall_at_k']}",
        ),
        (f"bare pgvector top-K, ef_search {default['ef_search']}", default, "pgvector default beam"),
    ]  # fmt: skip
    per_embedding = embedding["p50"]
    rows = [
        [label, f"{times['p50']:.1f}", f"{times['p95']:.1f}", _ratio_pair(times, per_embedding), note]
        for label, times, note in measures
    ]
    lines += [*markdown_table(["measure", "p50 ms", "p95 ms", EMBEDDING_RATIO, "note"], rows), ""]
    stages = [
        [stage, f"{v['p50']:.1f}", f"{v['p95']:.1f}", _ratio_pair(v, per_embedding)]
        for stage, v in report["vector_stages"].items()
    ]
    lines += markdown_table(["vector stage", "p50 ms", "p95 ms", EMBEDDING_RATIO], stages)
    if load and not load.get("reused"):
        parts = ", ".join(f"{key} {value}" for key, value in load.items())
        lines += ["", f"Load: {parts}."]
    if report.get("collection"):
        lines += [
            "",
            f"Kept collection: {report['collection']} (reuse it with --collection {report['collection']})",
        ]
    return "\n".join(lines) + "\n"


def _embedding_p50(entry: dict[str, Any]) -> float:
    """A dataset's query-embedding p50 (its ``embed`` stage; 0 when it has none)."""
    return float(entry["stages"].get("embed", {}).get("p50", 0.0))


def format_corpus_latency(report: dict[str, Any]) -> str:
    loaded = report["loaded"]
    target = report["target_ms"]
    lines = [
        f"bench-latency on ingested corpora: {loaded['collections']} collections loaded "
        f"({loaded['documents']} documents, {loaded['nodes']} nodes), {report['mode']} mode, "
        f"budget {report['budget']}, each query filtered to its dataset's collection, query embedding "
        f"included. Target: p50 <= {target['p50']:.0f} ms, p95 <= {target['p95']:.0f} ms server-side.",
        "",
    ]
    rows = [
        [
            entry["collection"], str(entry["documents"]), str(entry["nodes"]), str(entry["queries"]),
            f"{entry['server']['p50']:.1f}", f"{entry['server']['p95']:.1f}",
            _ratio_pair(entry["server"], _embedding_p50(entry)),
            f"{entry['wall']['p50']:.1f}", f"{entry['wall']['p95']:.1f}",
            ", ".join(f"{name} {count}" for name, count in entry["strategy"].items()),
            entry["collection_index"],
            "met" if entry["meets_target"] else "NOT met",
        ]
        for entry in report["datasets"]
    ]  # fmt: skip
    header = [
        "collection", "documents", "nodes", "queries", "server p50", "server p95",
        f"server {EMBEDDING_RATIO}", "wall p50", "wall p95",
        "vector strategy", "collection index", "target",
    ]  # fmt: skip
    lines += [*markdown_table(header, rows), ""]
    stage_names = list(dict.fromkeys(stage for entry in report["datasets"] for stage in entry["stages"]))
    header = [
        "stage (ms, p50 / p95; x embedding p50)",
        *(entry["collection"] for entry in report["datasets"]),
    ]
    rows = [
        [
            stage,
            *(
                f"{entry['stages'][stage]['p50']:.1f} / {entry['stages'][stage]['p95']:.1f}; "
                f"{_ratio_pair(entry['stages'][stage], _embedding_p50(entry))}"
                if stage in entry["stages"]
                else "-"
                for entry in report["datasets"]
            ),
        ]
        for stage in stage_names
    ]
    lines += markdown_table(header, rows)
    return "\n".join(lines) + "\n"


# -- bench-load ----------------------------------------------------------------------------------

LOAD_HEADER = (
    "request kind", "requests", "errors", "error %", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms",
    "cached",
)  # fmt: skip
LOAD_GROUPS = ("queries (all budgets)", "UI pages (all)", "sign-in (all)", "all requests")  # bold rows


def format_load(report: dict[str, Any]) -> str:
    background = report["background"]
    lines = [
        f"bench-load: collection {report['collection']} ({report['documents']} indexed documents), "
        f"gunicorn with {report['web_workers']} uvicorn workers + a Celery worker (concurrency 2), "
        "debug off, plain HTTP.",
        f"Background ingest (queued through the API, indexed by the Celery worker): {background['queued']} queued, "
        f"{background['indexed']} indexed, {background['failed']} failed, "
        f"{background['unfinished']} not finished when the load stopped "
        f"({background.get('indexing', 0)} of them being indexed).",
        "",
    ]
    for number, stage in enumerate(report["stages"], 1):
        rows = stage["rows"]
        lines += [f"### Stage {number}: {stage['users']} users for {stage['seconds']} s", ""]
        table_rows = [
            [
                f"**{row['kind']}**" if row["kind"] in LOAD_GROUPS else row["kind"],
                str(row["requests"]), str(row["errors"]), percent(row["error_rate"]),
                f"{row['per_second']:.1f}", f"{row['p50_ms']:.0f}", f"{row['p95_ms']:.0f}",
                f"{row['p99_ms']:.0f}", f"{row['max_ms']:.0f}",
                str(row["cached"]) if row["kind"].startswith("quer") else "",
            ]
            for row in rows
        ]  # fmt: skip
        lines += [*markdown_table(LOAD_HEADER, table_rows), ""]
        pages = next((row for row in rows if row["kind"] == "UI pages (all)"), None)
        if pages:
            lines.append(f"UI pages p95: {pages['p95_ms']:.0f} ms")
        for error in stage["errors"]:
            lines.append(f"- {error['count']} x {error['kind']}: {error['message']}")
        lines.append("")
    for problem in report["server_log_problems"][:10]:
        lines.append(f"web server log: {problem}")
    lines.append(f"Errors: {report['errors']}")
    return "\n".join(lines) + "\n"


# -- bench-cost ----------------------------------------------------------------------------------

COST_INGEST_HEADER = (
    "dataset", "docs", "doc tokens", "chunks", "LLM calls", "input tokens", "output tokens",
    "input / doc token", "output / doc token", "fallbacks",
)  # fmt: skip
COST_REINDEX_HEADER = (
    "dataset", "docs", "LLM calls", "cached calls", "requests served", "input tokens", "output tokens",
)  # fmt: skip
COST_QUERY_HEADER = (
    "docs in scope", "queries", "LLM calls / query", "input tokens / query (mean)",
    "input tokens / query (max)", "output tokens / query (mean)", "LLMselect input (max)",
    "LLMnavigate input (max)", "meets target",
)  # fmt: skip


def format_cost(report: dict[str, Any]) -> str:
    target = report["target_query_input_tokens"]
    lines = [
        f"bench-cost: scripted model {report['model']} over real HTTP (context window "
        f"{report['context_window']}); tokens as the server counted them (cl100k_base + chat framing).",
        "",
        "### Ingestion, LLM tree builder",
        "",
    ]
    rows = [_cost_ingest_row(row) for row in report["ingestion"]]
    lines += [*markdown_table(COST_INGEST_HEADER, rows), "", "### Re-indexing unchanged text (target 0)", ""]
    rows = [_cost_reindex_row(row) for row in report["reindex"]]
    lines += [*markdown_table(COST_REINDEX_HEADER, rows), ""]
    lines += [f"### Per query, bipath, budget {report['budget']} (target <= {target} input tokens)", ""]
    rows = [_cost_query_row(row) for row in report["queries"]]
    lines += markdown_table(COST_QUERY_HEADER, rows)
    lines += ["", *_cost_notes(report)]
    return "\n".join(lines) + "\n"


def _cost_ingest_row(row: dict[str, Any]) -> list[str]:
    return [
        row["dataset"], str(row["documents"]), str(row["document_tokens"]), str(row["chunks"]),
        str(row["server_requests"]), str(row["server_prompt_tokens"]),
        str(row["server_completion_tokens"]), f"{row['input_per_document_token']:.2f}",
        f"{row['output_per_document_token']:.3f}", str(row["fallbacks"]),
    ]  # fmt: skip


def _cost_reindex_row(row: dict[str, Any]) -> list[str]:
    return [
        row["dataset"], str(row["documents"]), str(row["llm_calls"]), str(row["cached_calls"]),
        str(row["server_requests"]), str(row["server_prompt_tokens"]), str(row["server_completion_tokens"]),
    ]  # fmt: skip


def _cost_query_row(row: dict[str, Any]) -> list[str]:
    return [
        str(row["documents_in_scope"]), str(row["queries"]), f"{row['calls_per_query']:.1f}",
        f"{row['input_mean']:.0f}", str(row["input_max"]), f"{row['output_mean']:.0f}",
        str(row["select_input_max"]), str(row["navigate_input_max"]),
        "yes" if row["meets_target"] else "NO",
    ]  # fmt: skip


def _cost_notes(report: dict[str, Any]) -> list[str]:
    """Whether the client's usage agrees with the server's, what failed, the corpus, the cleanup."""
    agree = all(row["client_agrees"] for key in ("ingestion", "reindex", "queries") for row in report[key])
    failed = sorted({name for row in report["queries"] for name in row["failed_paths"]})
    lines = [
        f"Client usage (jobs' llm_* fields, results' llm_usage) equals the server's count: {'yes' if agree else 'NO'}.",
    ]
    if failed:
        lines.append(f"LLM paths that failed in some query: {', '.join(failed)}.")
    if load := report.get("load") or {}:
        lines.append(
            f"Synthetic corpus: {load.get('documents')} documents, {load.get('nodes')} nodes, written in {load.get('write_s')} s."
        )
    lines.append(f"LLM cache rows of this run deleted: {report.get('cache_rows_deleted', 0)}.")
    return lines


# -- bench-local-models --------------------------------------------------------------------------

LOCAL_MODELS_HEADER = (
    "model", "prompts", "calls", "valid JSON %", "asked shape %", "ids offered %",
    "answer tokens (mean / max)", "s per call (p50 / max)",
)  # fmt: skip


def format_local_models(report: dict[str, Any]) -> str:
    """One row per model and kind of prompt, then the model's total."""
    rows = []
    for measured in report["models"]:
        kinds = [*measured["by_kind"].items(), ("all", measured["all"])]
        rows += [_local_model_row(measured["model"], kind, shares) for kind, shares in kinds]
    return "\n".join(markdown_table(LOCAL_MODELS_HEADER, rows))


def _local_model_row(model: str, kind: str, shares: dict[str, Any]) -> list[str]:
    offered = shares["offered"]
    return [
        model,
        kind,
        str(shares["calls"]),
        percent(shares["valid_json"]),
        percent(shares["shaped"]),
        "-" if offered is None else f"{percent(offered)} ({shares['named']})",
        f"{shares['answer_tokens_mean']:.0f} / {shares['answer_tokens_max']}",
        f"{shares['seconds_p50']:.1f} / {shares['seconds_max']:.1f}",
    ]


def format_cost_real(report: dict[str, Any]) -> str:
    """bench-cost --real-llm: the LLM builder against the structural one, then the bipath queries."""
    lines = [f"bench-cost --real-llm: local model {report['model']}, one call at a time.", ""]
    for dataset in report["datasets"]:
        if skipped := dataset.get("skipped_documents"):
            lines.append(
                f"{dataset['dataset']}: the {skipped} shortest documents skipped (--skip-documents)."
            )
        if limited := dataset.get("time_limit"):
            lines.append(
                f"{dataset['dataset']}: time limit of {limited['seconds']:.0f} s: "
                f"{limited['indexed']} of {limited['of']} documents indexed."
            )
    lines += ["", "### Ingestion: the LLM builder against the structural builder", ""]
    rows = [_ingestion_row(dataset["dataset"], dataset["ingestion"]) for dataset in report["datasets"]]
    header = [
        "dataset", "documents", "document tokens", "LLM calls", "input / output tokens per document token",
        "LLM builder s", "structural s", "times", "trees the LLM built", "fallbacks",
    ]  # fmt: skip
    lines += [*markdown_table(header, rows), ""]
    lines += [f"### bipath queries (budget {report['budget']})", ""]
    rows = [_query_row(dataset["dataset"], dataset["queries"]) for dataset in report["datasets"]]
    header = [
        "dataset", "queries", "calls per query", "input / output tokens per query", "s per query",
        "LLM s per call", "paths failed", "fallbacks",
    ]  # fmt: skip
    return "\n".join([*lines, *markdown_table(header, rows)]) + "\n"


def _ingestion_row(name: str, ingestion: dict[str, Any]) -> list[str]:
    tokens = ingestion["document_tokens"] or 1
    ratio = ingestion.get("time_against_structural")
    return [
        name,
        str(ingestion["documents"]),
        f"{ingestion['document_tokens']:,}",
        str(ingestion["calls"]),
        f"{ingestion['prompt_tokens'] / tokens:.2f} / {ingestion['completion_tokens'] / tokens:.3f}",
        f"{ingestion['seconds']:,.1f}",
        f"{ingestion['structural_seconds']:,.1f}",
        f"{ratio:,.1f}x" if ratio is not None else "-",
        f"{ingestion['documents'] - ingestion['structural_fallbacks']} of {ingestion['documents']}",
        _fallbacks(ingestion["fallbacks"]),
    ]


def _query_row(name: str, queries: dict[str, Any]) -> list[str]:
    return [
        name,
        str(queries["queries"]),
        f"{queries['calls_per_query']:.2f}",
        f"{queries['prompt_tokens_per_query']:,} / {queries['completion_tokens_per_query']:,}",
        f"{queries['seconds_per_query']:.1f}",
        f"{queries['llm_seconds_per_call']:.1f}",
        str(queries["failed_paths"]),
        _fallbacks(queries["fallbacks"]),
    ]


def _fallbacks(counts: dict[str, int]) -> str:
    return ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items())) or "none"
