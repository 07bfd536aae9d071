"""Retrieval subcommands of `manage.py openfable`: `query`, `bench-retrieval`, `bench-latency`.

``openfable query "text" --budget N [--mode vector|bipath|llm] [--collection SLUG]
[--document ID ...] [--tag T ...]`` prints the result's ``to_dict()`` as one JSON object; input
the engine refuses (budget, mode, filters) prints {"error": "..."} and exits with status 1.
The benchmarks print markdown tables (and ``--json PATH`` writes the same numbers).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    query = subparsers.add_parser("query", help="retrieve the most relevant text within a token budget")
    query.add_argument("text", help="the query")
    # Strings, checked by the engine: a wrong value answers {"error": ...}, not an argparse usage.
    query.add_argument("--budget", default=None, help="token budget (default OPENFABLE_TOKEN_BUDGET_DEFAULT)")
    query.add_argument("--mode", default=None, help="vector, bipath or llm (default: bipath with an LLM)")
    query.add_argument("--collection", default=None, help="collection slug or id")
    query.add_argument("--document", action="append", default=None, help="document id (repeatable)")
    query.add_argument(
        "--tag", action="append", default=None, help="tag every document must carry (repeatable)"
    )
    query.set_defaults(handler=_handle_query)

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


def _handle_query(options: dict[str, Any]) -> dict[str, Any]:
    from django.conf import settings

    from openfable.management.commands.openfable import CommandInputError
    from retrieval.result import RetrievalInputError
    from retrieval.services import retrieve

    budget: Any = options.get("budget")
    if budget is None:
        budget = settings.TOKEN_BUDGET_DEFAULT
    elif isinstance(budget, str) and budget.strip().lstrip("-").isdigit():
        budget = int(budget.strip())
    try:
        result = retrieve(
            query=options["text"],
            token_budget=budget,
            mode=options.get("mode") or None,
            collection=options.get("collection") or None,
            documents=options.get("document") or None,
            tags=options.get("tag") or None,
        )
    except RetrievalInputError as error:
        raise CommandInputError(str(error)) from error
    return result.to_dict()


def _parse_budgets(text: str) -> list[int]:
    from django.conf import settings

    from openfable.management.commands.openfable import CommandInputError

    low, high = settings.TOKEN_BUDGET_MIN, settings.TOKEN_BUDGET_MAX
    budgets = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        try:
            value = int(float(part[:-1]) * 1000) if part.endswith("k") else int(part)
        except ValueError:
            raise CommandInputError(
                f"--budgets: {part!r} is not a number of tokens (e.g. 500,1000,2K)"
            ) from None
        if not low <= value <= high:
            raise CommandInputError(f"--budgets: {value} is outside the accepted range {low}–{high} tokens")
        budgets.append(value)
    if not budgets:
        raise CommandInputError("--budgets: give at least one budget, e.g. 500,1000,2000")
    return sorted(set(budgets))


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _handle_bench_retrieval(options: dict[str, Any]) -> str:
    from openfable.management.commands.openfable import CommandInputError
    from retrieval.bench.retrieval_bench import (
        ALL_METHODS,
        BenchInputError,
        bench_retrieval,
        format_report,
        write_json,
    )

    for flag in ("docs", "queries"):
        if not options[flag].is_file():
            raise CommandInputError(f"--{flag} {options[flag]}: no such file")
    budgets = _parse_budgets(options["budgets"])
    methods = None
    if options.get("modes"):
        methods = [m.strip() for m in options["modes"].split(",") if m.strip()]
        unknown = [m for m in methods if m not in ALL_METHODS]
        if unknown or not methods:
            raise CommandInputError(
                f"--modes: unknown {', '.join(unknown)}; choose among {', '.join(ALL_METHODS)}"
            )
        methods = [m for m in ALL_METHODS if m in methods]  # the table's order
    if options["max_queries"] < 0:
        raise CommandInputError("--max-queries must be 0 (all) or more")
    try:
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
    except BenchInputError as error:
        raise CommandInputError(str(error)) from error
    if options.get("json_path"):
        write_json(report, options["json_path"])
    table = format_report(report)
    if report.get("collection") and not options.get("collection"):
        table += (
            f"\nKept collection: {report['collection']} (reuse it with --collection {report['collection']})\n"
        )
    return table


def _handle_bench_latency(options: dict[str, Any]) -> str:
    from openfable.management.commands.openfable import CommandInputError
    from retrieval.bench.latency_bench import BenchInputError, bench_latency, format_latency
    from retrieval.bench.retrieval_bench import write_json

    if options["nodes"] < 10 or options["nodes_per_document"] < 8:
        raise CommandInputError("--nodes must be at least 10 and --nodes-per-document at least 8")
    if options["queries"] < 1:
        raise CommandInputError("--queries must be at least 1")
    try:
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
    except BenchInputError as error:
        raise CommandInputError(str(error)) from error
    if options.get("json_path"):
        write_json(report, options["json_path"])
    return format_latency(report)
