"""The benchmark subcommands of `openfable`: `bench-ingest`, `bench-retrieval`, `bench-latency`.

They print markdown tables (``--json PATH`` writes the same numbers). Registered into the
command line from here (see ``cli.management.commands.openfable.SUBCOMMAND_MODULES``). The
handlers only parse, call ``benchmarks.ingest`` / ``retrieval`` / ``latency`` and render through
``benchmarks.report``; a mistake the user can fix raises ``BenchInputError``, which the command
line prints as ``{"error": ...}`` with exit status 1. The benchmark modules are imported when a
benchmark runs, not when the command line starts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from benchmarks import BenchInputError


def register(subparsers: Any) -> None:
    ingest = subparsers.add_parser("bench-ingest", help="time structural ingestion of JSONL datasets")
    ingest.add_argument("--docs", action="append", required=True, type=Path, help="JSONL file (repeatable)")
    ingest.add_argument("--limit", type=int, default=0, help="first N documents of each file (0: all)")
    ingest.add_argument("--json", dest="json_path", type=Path, help="also write the results here")
    ingest.add_argument("--keep", action="store_true", help="keep the throw-away collection")
    ingest.set_defaults(handler=_handle_bench_ingest)

    bench = subparsers.add_parser(
        "bench-retrieval",
        help="recall / EIR / latency of the engine against flat baselines (DragonBall JSONL)",
    )
    bench.add_argument(
        "--docs", required=True, type=Path, help="documents JSONL (doc_id, company_name, content)"
    )
    bench.add_argument("--queries", required=True, type=Path, help="queries JSONL (query, ground_truth)")
    bench.add_argument("--budgets", default="500,1000,2000,4000,8000", help="comma-separated token budgets")
    bench.add_argument(
        "--modes",
        default="",
        help="comma-separated methods among ceiling, oracle, bm25, dense, vector, bipath, llm "
        "(default: all; bipath and llm only with an LLM configured)",
    )
    bench.add_argument("--max-queries", type=int, default=0, help="stratified sample by query type (0: all)")
    bench.add_argument(
        "--collection", default="", help="reuse this already-ingested collection (skips ingestion)"
    )
    bench.add_argument(
        "--keep", action="store_true", help="keep the throw-away collection (its slug is printed)"
    )
    bench.add_argument("--json", dest="json_path", type=Path, help="also write every number here")
    bench.set_defaults(handler=_handle_bench_retrieval)

    latency = subparsers.add_parser(
        "bench-latency", help="vector-mode latency on a synthetic corpus vs a bare pgvector top-K query"
    )
    latency.add_argument("--nodes", type=int, default=100_000, help="synthetic nodes (default 100000)")
    latency.add_argument("--nodes-per-document", type=int, default=100)
    latency.add_argument("--queries", type=int, default=200, help="timed queries")
    latency.add_argument("--budget", type=int, default=2000)
    latency.add_argument(
        "--rebuild-index",
        action="store_true",
        help="drop the HNSW index for the bulk load and recreate it after (faster; blocks other users)",
    )
    latency.add_argument("--keep", action="store_true", help="keep the synthetic collection")
    latency.add_argument("--collection", default="", help="reuse a synthetic collection made with --keep")
    latency.add_argument("--json", dest="json_path", type=Path, help="also write every number here")
    latency.set_defaults(handler=_handle_bench_latency)


def _parse_budgets(text: str) -> list[int]:
    low, high = settings.TOKEN_BUDGET_MIN, settings.TOKEN_BUDGET_MAX
    budgets = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        try:
            value = int(float(part[:-1]) * 1000) if part.endswith("k") else int(part)
        except ValueError:
            raise BenchInputError(
                f"--budgets: {part!r} is not a number of tokens (e.g. 500,1000,2K)"
            ) from None
        if not low <= value <= high:
            raise BenchInputError(f"--budgets: {value} is outside the accepted range {low}–{high} tokens")
        budgets.append(value)
    if not budgets:
        raise BenchInputError("--budgets: give at least one budget, e.g. 500,1000,2000")
    return sorted(set(budgets))


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _check_files(flag: str, paths: list[Path]) -> None:
    for path in paths:
        if not path.is_file():
            raise BenchInputError(f"--{flag} {path}: no such file")


def _handle_bench_ingest(options: dict[str, Any]) -> str:
    from benchmarks.ingest import bench_ingest
    from benchmarks.report import format_ingest, write_json

    _check_files("docs", options["docs"])
    if options["limit"] < 0:
        raise BenchInputError("--limit must be 0 (all) or more")
    rows = [
        bench_ingest(path, limit=options["limit"], keep=options["keep"], log=_log) for path in options["docs"]
    ]
    if options.get("json_path"):
        write_json({"rows": [row.as_json() for row in rows]}, options["json_path"])
    return format_ingest(rows)


def _handle_bench_retrieval(options: dict[str, Any]) -> str:
    from benchmarks.report import format_retrieval, write_json
    from benchmarks.retrieval import ALL_METHODS, bench_retrieval

    _check_files("docs", [options["docs"]])
    _check_files("queries", [options["queries"]])
    budgets = _parse_budgets(options["budgets"])
    methods = None
    if options.get("modes"):
        methods = [m.strip() for m in options["modes"].split(",") if m.strip()]
        unknown = [m for m in methods if m not in ALL_METHODS]
        if unknown or not methods:
            raise BenchInputError(
                f"--modes: unknown {', '.join(unknown)}; choose among {', '.join(ALL_METHODS)}"
            )
        methods = [m for m in ALL_METHODS if m in methods]  # the table's order
    if options["max_queries"] < 0:
        raise BenchInputError("--max-queries must be 0 (all) or more")
    report = bench_retrieval(
        docs_path=options["docs"],
        queries_path=options["queries"],
        budgets=budgets,
        methods=methods,
        max_queries=options["max_queries"],
        keep=options["keep"],
        collection_slug=options.get("collection") or "",
        log=_log,
    )
    if options.get("json_path"):
        write_json(report, options["json_path"])
    table = format_retrieval(report)
    if report.get("collection") and not options.get("collection"):
        table += (
            f"\nKept collection: {report['collection']} (reuse it with --collection {report['collection']})\n"
        )
    return table


def _handle_bench_latency(options: dict[str, Any]) -> str:
    from benchmarks.latency import bench_latency
    from benchmarks.report import format_latency, write_json

    if options["nodes"] < 10 or options["nodes_per_document"] < 8:
        raise BenchInputError("--nodes must be at least 10 and --nodes-per-document at least 8")
    if options["queries"] < 1:
        raise BenchInputError("--queries must be at least 1")
    report = bench_latency(
        nodes=options["nodes"],
        nodes_per_document=options["nodes_per_document"],
        queries=options["queries"],
        budget=options["budget"],
        rebuild_index=options["rebuild_index"],
        keep=options["keep"],
        collection_slug=options.get("collection") or "",
        log=_log,
    )
    if options.get("json_path"):
        write_json(report, options["json_path"])
    return format_latency(report)
