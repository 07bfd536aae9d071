"""The benchmark subcommands (`python -m fable_benchmarks ...`): `bench-ingest` (and `bench-ingest-large`),
`bench-retrieval` (and `bench-plot`, its chart from a saved report), `bench-latency`, `bench-load`,
`bench-cost`, `bench-local-models`, `bench-extract`, `bench-ocr`, `bench-broker`, `bench-structure`.

They print markdown tables (``--json PATH`` writes the same numbers). Registered into the
benchmarks' own command (``fable_benchmarks.command.BenchCommand``, the product's `openfable`
command with these subcommands instead), so the product never loads them. The
handlers only parse, call ``fable_benchmarks.ingest`` / ``retrieval`` / ``latency`` / ``cost`` and render
through ``fable_benchmarks.report`` (tables) or ``fable_benchmarks.plot`` (the SVG chart); a mistake the user
can fix raises ``BenchInputError``, which the command line prints as ``{"error": ...}`` with exit
status 1. The benchmark modules are imported when a benchmark runs, not when the command line
starts.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from fable_benchmarks import BenchInputError

if TYPE_CHECKING:
    from fable_benchmarks.structure_run import StructureCase

# bench-structure's rows (fable_benchmarks.structure.FORMATS, which loads only when it runs).
STRUCTURE_FORMATS = ("pdf", "pdf-bookmarks", "docx", "html", "markdown")


def register(subparsers: Any) -> None:
    ingest = subparsers.add_parser("bench-ingest", help="time structural ingestion of JSONL datasets")
    ingest.add_argument("--docs", action="append", default=[], type=Path, help="JSONL file (repeatable)")
    ingest.add_argument(
        "--files",
        action="append",
        default=[],
        type=Path,
        help='JSONL of {"doc_id", "file"} (e.g. cuad/pdfs.jsonl): upload the files, extraction timed in '
        "(repeatable)",
    )
    ingest.add_argument("--limit", type=int, default=0, help="first N documents of each file (0: all)")
    ingest.add_argument("--json", dest="json_path", type=Path, help="also write the results here")
    ingest.add_argument("--keep", action="store_true", help="keep the throw-away collection")
    ingest.set_defaults(handler=_handle_bench_ingest)

    large = subparsers.add_parser(
        "bench-ingest-large",
        help="index one document at the size limit: minutes, peak memory, builder and model time per token",
    )
    large.add_argument(
        "--docs",
        action="append",
        required=True,
        type=Path,
        help="JSONL file the text is made from (repeatable)",
    )
    large.add_argument(
        "--megabytes", type=float, default=0, help="size in MB (default: OPENFABLE_MAX_DOCUMENT_BYTES)"
    )
    large.add_argument("--json", dest="json_path", type=Path, help="also write the results here")
    large.set_defaults(handler=_handle_bench_ingest_large)

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
        help="comma-separated methods among ceiling, oracle, bm25, dense, hybrid-256, hybrid-512, "
        "parent-child, vector (and its ablations), bipath, llm (default: all; bipath and llm only with an "
        "LLM configured; with --scoped the engine's vector mode alone)",
    )
    bench.add_argument(
        "--scoped",
        action="store_true",
        help="each single-document query without its document's name, filtered to that document",
    )
    bench.add_argument("--max-queries", type=int, default=0, help="stratified sample by query type (0: all)")
    bench.add_argument(
        "--limit", type=int, default=0, help="first N documents, and the queries about them (0: all)"
    )
    bench.add_argument(
        "--time-limit",
        type=float,
        default=0.0,
        help="seconds: ask no further query of the sample once they have passed, and report the "
        "queries run (0: none); --skip-queries goes on from there in a later run",
    )
    bench.add_argument(
        "--skip-queries",
        type=int,
        default=0,
        help="start after the first N queries of the sample: go on from a run --time-limit cut "
        "(bench-merge joins the two reports)",
    )
    bench.add_argument(
        "--collection", default="", help="reuse this already-ingested collection (skips ingestion)"
    )
    bench.add_argument(
        "--keep", action="store_true", help="keep the throw-away collection (its slug is printed)"
    )
    bench.add_argument("--json", dest="json_path", type=Path, help="also write every number here")
    bench.add_argument(
        "--plot", dest="plot_path", type=Path, help="also draw recall against budget here (SVG)"
    )
    bench.add_argument(
        "--files",
        type=Path,
        default=None,
        help='JSONL of {"doc_id", "file"} (e.g. cuad/pdfs.jsonl): also upload the documents as these '
        "files and compare, matching on normalised text",
    )
    bench.set_defaults(handler=_handle_bench_retrieval)

    merge = subparsers.add_parser(
        "bench-merge",
        help="one bench-retrieval report from runs over parts of one sample (--time-limit, --skip-queries)",
    )
    merge.add_argument("reports", nargs="+", type=Path, help="bench-retrieval --json files, in sample order")
    merge.add_argument("--json", dest="json_path", type=Path, help="also write the joined report here")
    merge.set_defaults(handler=_handle_bench_merge)

    plot = subparsers.add_parser(
        "bench-plot", help="draw recall against budget (SVG) from a bench-retrieval --json file"
    )
    plot.add_argument(
        "--json", dest="json_path", required=True, type=Path, help="written by bench-retrieval --json"
    )
    plot.add_argument("--out", dest="plot_path", required=True, type=Path, help="the SVG to write")
    plot.add_argument("--title", default="", help="chart title (default: dataset and query count)")
    plot.set_defaults(handler=_handle_bench_plot)

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
    latency.add_argument(
        "--dataset",
        dest="datasets",
        action="append",
        nargs="+",
        metavar="PATH",
        help="DOCS QUERIES [COLLECTION]: time real queries on this ingested corpus instead of a synthetic "
        "one (repeatable: every dataset stays loaded, each query filtered to its own collection; "
        "without COLLECTION the documents are ingested now and kept)",
    )
    latency.add_argument("--json", dest="json_path", type=Path, help="also write every number here")
    latency.set_defaults(handler=_handle_bench_latency)

    load = subparsers.add_parser(
        "bench-load",
        help="concurrent API and UI users against gunicorn + a Celery worker ingesting meanwhile (locust)",
    )
    load.add_argument(
        "--collection", default="", help="reuse this indexed collection (else --docs is indexed first)"
    )
    load.add_argument(
        "--docs", type=Path, default=_shared("dragonball/docs_en.jsonl"), help="documents JSONL"
    )
    load.add_argument("--docs-limit", type=int, default=0, help="first N documents of --docs (0: all)")
    load.add_argument(
        "--queries", type=Path, default=_shared("dragonball/queries_en_dev.jsonl"), help="queries JSONL"
    )
    load.add_argument(
        "--background-docs",
        type=Path,
        default=_shared("cuad/docs.jsonl"),
        help="documents queued through the API and indexed by the worker during the run",
    )
    load.add_argument("--background-limit", type=int, default=20, help="how many of them (0: none)")
    load.add_argument(
        "--stages", default="50x120,200x120", help="USERSxSECONDS, comma-separated, run one after the other"
    )
    load.add_argument("--budgets", default="500,1000,2000,4000,8000", help="query budgets, picked at random")
    load.add_argument("--ui-share", type=float, default=0.2, help="share of the users who load UI pages")
    load.add_argument(
        "--think-seconds", type=float, default=1.0, help="mean wait between a user's requests (0: none)"
    )
    load.add_argument("--spawn-rate", type=float, default=10.0, help="users started per second")
    load.add_argument("--web-workers", type=int, default=2, help="gunicorn's uvicorn workers")
    load.add_argument("--keep", action="store_true", help="keep the collection indexed from --docs")
    load.add_argument("--json", dest="json_path", type=Path, help="also write every number here")
    load.set_defaults(handler=_handle_bench_load)

    cost = subparsers.add_parser(
        "bench-cost",
        help="LLM tokens of ingestion, re-indexing and queries, against a scripted model over HTTP",
    )
    cost.add_argument(
        "--docs", action="append", required=True, type=Path, help="JSONL file to ingest (repeatable)"
    )
    cost.add_argument(
        "--ingest-limit", type=int, default=5, help="first N documents of each file (default 5)"
    )
    cost.add_argument(
        "--scopes", default="10,100,1000", help="documents in scope for the query rows (comma-separated)"
    )
    cost.add_argument("--queries", type=int, default=10, help="queries per scope size (default 10)")
    cost.add_argument("--budget", type=int, default=2000, help="token budget of each query")
    cost.add_argument(
        "--nodes-per-document", type=int, default=30, help="nodes of each synthetic document (default 30)"
    )
    cost.add_argument("--json", dest="json_path", type=Path, help="also write every number here")
    cost.add_argument(
        "--real-llm",
        action="store_true",
        help="against the real local model (OPENFABLE_LLM=local's, started here): the --ingest-limit "
        "shortest documents of each --docs file, then --queries bipath queries from the queries file "
        "beside it (--queries-file, repeatable, in the order of --docs); time, tokens and fallbacks",
    )
    cost.add_argument("--queries-file", action="append", type=Path, default=[], help="with --real-llm")
    cost.add_argument(
        "--skip-documents",
        type=int,
        default=0,
        help="with --real-llm: start after the N shortest documents of each file (go on from a run "
        "--time-limit cut)",
    )
    cost.add_argument(
        "--time-limit",
        type=float,
        default=0.0,
        help="with --real-llm: seconds after which no further document is indexed (0: none)",
    )
    cost.add_argument(
        "--local-model",
        default="",
        help="with --real-llm: which local model (gemma-3-270m, smollm2-135m; default: "
        "OPENFABLE_LOCAL_LLM_MODEL)",
    )
    cost.set_defaults(handler=_handle_bench_cost)

    models = subparsers.add_parser(
        "bench-local-models",
        help="the local models on the engine's own prompts: valid JSON, shape, ids offered, tokens, speed",
    )
    models.add_argument(
        "--docs", action="append", required=True, type=Path, help="documents JSONL (repeatable)"
    )
    models.add_argument(
        "--queries-file",
        action="append",
        required=True,
        type=Path,
        help="the queries JSONL of each --docs file, in the same order",
    )
    models.add_argument(
        "--models",
        default="gemma-3-270m,smollm2-135m",
        help="comma-separated local models (openfable.local_llm.MODELS)",
    )
    models.add_argument("--documents", type=int, default=3, help="shortest documents per file (default 3)")
    models.add_argument("--queries", type=int, default=2, help="bipath queries per file (default 2)")
    models.add_argument("--budget", type=int, default=2000, help="token budget of each query")
    models.add_argument(
        "--base-url", default="", help="measure the server already running here (--models: its name)"
    )
    models.add_argument("--json", dest="json_path", type=Path, help="also write every answer here")
    models.set_defaults(handler=_handle_bench_local_models)

    extract = subparsers.add_parser(
        "bench-extract",
        help="PDF extraction candidates on real PDFs: extraction ceiling, pages per second, peak memory",
    )
    extract.add_argument(
        "--files", required=True, type=Path, help='JSONL of {"doc_id", "file"} (e.g. cuad/pdfs.jsonl)'
    )
    extract.add_argument(
        "--queries", type=Path, default=None, help="gold references (default: queries.jsonl beside --files)"
    )
    extract.add_argument(
        "--candidates",
        default="",
        help="comma-separated among pypdfium2, pdfplumber, pypdfium2+clean, pdfplumber+clean, reference "
        "(default: all)",
    )
    extract.add_argument("--limit", type=int, default=0, help="first N files (0: all)")
    extract.add_argument("--json", dest="json_path", type=Path, help="also write every number here")
    extract.set_defaults(handler=_handle_bench_extract)

    ocr = subparsers.add_parser(
        "bench-ocr", help="scanned pages read by OCR through the worker's path: pages per second, words found"
    )
    ocr.add_argument("--pages", type=int, default=20, help="image-only pages made and read (default 20)")
    ocr.add_argument("--dpi", default="200,300", help="comma-separated scan resolutions (default 200,300)")
    ocr.add_argument(
        "--languages",
        default="eng",
        help="Tesseract languages, joined by + (default eng, as OPENFABLE_OCR_LANGUAGES)",
    )
    ocr.add_argument("--json", dest="json_path", type=Path, help="also write every number here")
    ocr.set_defaults(handler=_handle_bench_ocr)

    broker = subparsers.add_parser(
        "bench-broker", help="how fast one worker drains each broker (no-op messages)"
    )
    broker.add_argument("--messages", type=int, default=300, help="messages queued before the worker starts")
    broker.add_argument(
        "--brokers",
        default="filesystem,redis",
        help="comma-separated among redis (the embedded default), filesystem (the one before it), "
        "sqlalchemy (kombu's SQL transport on the app's database; needs SQLAlchemy installed)",
    )
    broker.add_argument(
        "--polling",
        default="default",
        help="comma-separated OPENFABLE_BROKER_POLLING_SECONDS values to compare ('default': unset); "
        "for the brokers that poll (filesystem, sqlalchemy)",
    )
    broker.set_defaults(handler=_handle_bench_broker)

    structure = subparsers.add_parser(
        "bench-structure",
        help="how well trees follow real headings: recall, level agreement, buried and invented sections",
    )
    structure.add_argument(
        "--cuad-gold",
        type=Path,
        default=None,
        help="hand-checked headings of CUAD PDFs (default: fable_benchmarks/structure_gold/cuad_pdf.json)",
    )
    structure.add_argument(
        "--pdf-dir", type=Path, default=_shared("cuad/pdf"), help="the PDFs the gold names (default: CUAD's)"
    )
    structure.add_argument(
        "--formats",
        default=",".join(STRUCTURE_FORMATS),
        help="comma-separated among " + ", ".join(STRUCTURE_FORMATS) + " (default: all)",
    )
    structure.add_argument("--only", default="", help="only documents whose file name holds this")
    structure.add_argument("--limit", type=int, default=0, help="first N documents of each format (0: all)")
    structure.add_argument(
        "--details", action="store_true", help="also list per document what was missed, buried or invented"
    )
    structure.add_argument("--json", dest="json_path", type=Path, help="also write every number here")
    structure.set_defaults(handler=_handle_bench_structure)


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


def _comma_list(text: str) -> list[str]:
    """The non-blank parts of a comma-separated option, stripped."""
    return [part.strip() for part in text.split(",") if part.strip()]


def _check_choices(flag: str, chosen: list[str], allowed: Sequence[str]) -> None:
    """Every one of ``chosen`` is one of ``allowed``, and there is at least one."""
    unknown = [name for name in chosen if name not in allowed]
    if unknown or not chosen:
        raise BenchInputError(f"{flag}: unknown {', '.join(unknown)}; choose among {', '.join(allowed)}")


def _save_json(options: dict[str, Any], report: dict[str, Any]) -> None:
    """Every number, where --json asks for it."""
    from fable_benchmarks.report import write_json

    if options.get("json_path"):
        write_json(report, options["json_path"])


def _handle_bench_ingest_large(options: dict[str, Any]) -> str:
    from fable_benchmarks.large_document import bench_large_document
    from fable_benchmarks.report import format_large_document, write_json

    _check_files("docs", options["docs"])
    if options["megabytes"] < 0:
        raise BenchInputError("--megabytes must be 0 (the limit) or more")
    size = int(options["megabytes"] * 1_000_000) or None
    row = bench_large_document(options["docs"], size=size, log=_log)
    if options.get("json_path"):
        write_json({"rows": [row.as_json()]}, options["json_path"])
    return format_large_document([row])


def _handle_bench_ingest(options: dict[str, Any]) -> str:
    from fable_benchmarks.ingest import bench_ingest
    from fable_benchmarks.report import format_ingest, write_json

    _check_files("docs", options["docs"])
    _check_files("files", options["files"])
    if not options["docs"] and not options["files"]:
        raise BenchInputError("give --docs JSONL or --files JSONL (or both, each repeatable)")
    if options["limit"] < 0:
        raise BenchInputError("--limit must be 0 (all) or more")
    inputs = [(path, False) for path in options["docs"]] + [(path, True) for path in options["files"]]
    rows = [
        bench_ingest(path, limit=options["limit"], keep=options["keep"], files=files, log=_log)
        for path, files in inputs
    ]
    if options.get("json_path"):
        write_json({"rows": [row.as_json() for row in rows]}, options["json_path"])
    return format_ingest(rows)


def _handle_bench_retrieval(options: dict[str, Any]) -> str:
    from fable_benchmarks.report import format_retrieval
    from fable_benchmarks.retrieval import bench_retrieval

    _check_files("docs", [options["docs"]])
    _check_files("queries", [options["queries"]])
    if options.get("files") is not None:
        _check_files("files", [options["files"]])
    budgets = _parse_budgets(options["budgets"])
    methods = _parse_retrieval_methods(options.get("modes"))
    limit = options.get("limit") or 0
    numbers = (
        options["max_queries"],
        limit,
        options.get("time_limit") or 0,
        options.get("skip_queries") or 0,
    )
    if min(numbers) < 0:
        raise BenchInputError(
            "--max-queries, --limit, --time-limit and --skip-queries must be 0 (none) or more"
        )
    report = bench_retrieval(
        docs_path=options["docs"],
        queries_path=options["queries"],
        budgets=budgets,
        methods=methods,
        max_queries=options["max_queries"],
        keep=options["keep"],
        collection_slug=options.get("collection") or "",
        files_path=options.get("files"),
        limit=limit,
        scoped=bool(options.get("scoped")),
        time_limit_s=options.get("time_limit") or 0.0,
        skip_queries=options.get("skip_queries") or 0,
        log=_log,
    )
    _save_json(options, report)
    if options.get("plot_path"):
        from fable_benchmarks.plot import write_recall_chart

        write_recall_chart(report, options["plot_path"])
    return format_retrieval(report) + _kept_collection_note(report, reused=bool(options.get("collection")))


def _handle_bench_merge(options: dict[str, Any]) -> str:
    from fable_benchmarks.merge import merge_retrieval_reports
    from fable_benchmarks.report import format_retrieval

    _check_files("reports", options["reports"])
    parts = []
    for path in options["reports"]:
        try:
            parts.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            raise BenchInputError(f"{path} is not a bench-retrieval --json report ({exc})") from exc
    try:
        report = merge_retrieval_reports(parts, [path.name for path in options["reports"]])
    except (KeyError, TypeError) as exc:
        raise BenchInputError(f"a report lacks what bench-retrieval --json writes ({exc!r})") from exc
    _save_json(options, report)
    return format_retrieval(report)


def _parse_retrieval_methods(modes: str | None) -> list[str] | None:
    """--modes in the table's order; None (the default methods) without it."""
    from fable_benchmarks.retrieval import ALL_METHODS

    if not modes:
        return None
    methods = _comma_list(modes)
    _check_choices("--modes", methods, ALL_METHODS)
    return [m for m in ALL_METHODS if m in methods]


def _kept_collection_note(report: dict[str, Any], *, reused: bool) -> str:
    """How to reuse the collection this run ingested and kept (--keep)."""
    if not report.get("collection") or reused:
        return ""
    return f"\nKept collection: {report['collection']} (reuse it with --collection {report['collection']})\n"


def _handle_bench_plot(options: dict[str, Any]) -> str:
    from fable_benchmarks.plot import read_report, recall_series, write_recall_chart

    report = read_report(options["json_path"])
    write_recall_chart(report, options["plot_path"], title=options["title"])
    budgets, series = recall_series(report)
    return (
        f"Wrote {options['plot_path']}: recall of {', '.join(series)} "
        f"at {', '.join(str(budget) for budget in budgets)} tokens\n"
    )


def _shared(relative: str) -> Path:
    """A dataset beside the repository (../shared/datasets, or OPENFABLE_SHARED_DIR/datasets)."""
    shared = Path(os.environ.get("OPENFABLE_SHARED_DIR") or Path(settings.BASE_DIR).parent / "shared")
    return shared / "datasets" / relative


def _parse_stages(text: str) -> list[Any]:
    from fable_benchmarks.load import Stage

    stages = []
    for part in text.split(","):
        users, _, seconds = part.strip().lower().partition("x")
        if not (users.isdigit() and seconds.isdigit() and int(users) > 0 and int(seconds) > 0):
            raise BenchInputError(f"--stages: {part.strip()!r} is not USERSxSECONDS, e.g. 50x120,200x120")
        stages.append(Stage(users=int(users), seconds=int(seconds)))
    return stages


def _handle_bench_load(options: dict[str, Any]) -> str:
    from fable_benchmarks.load import LoadErrors, LoadOptions, bench_load
    from fable_benchmarks.report import format_load, write_json

    _check_files("queries", [options["queries"]])
    if not options["collection"]:
        _check_files("docs", [options["docs"]])
    if options["background_limit"] < 0:
        raise BenchInputError("--background-limit must be 0 (none) or more")
    if options["background_limit"]:
        _check_files("background-docs", [options["background_docs"]])
    if not 0 <= options["ui_share"] <= 1:
        raise BenchInputError("--ui-share is a share of the users, from 0 to 1 (e.g. 0.2)")
    if options["think_seconds"] < 0 or options["spawn_rate"] <= 0 or options["web_workers"] < 1:
        raise BenchInputError("--think-seconds must be 0 or more, --spawn-rate and --web-workers above 0")
    report = bench_load(
        LoadOptions(
            stages=_parse_stages(options["stages"]),
            budgets=_parse_budgets(options["budgets"]),
            queries_path=options["queries"],
            collection_slug=options["collection"],
            docs_path=options["docs"],
            docs_limit=max(0, options["docs_limit"]),
            background_path=options["background_docs"],
            background_limit=options["background_limit"],
            ui_share=options["ui_share"],
            think_seconds=options["think_seconds"],
            spawn_rate=options["spawn_rate"],
            web_workers=options["web_workers"],
            keep=options["keep"],
        ),
        log=_log,
    )
    if options.get("json_path"):
        write_json(report, options["json_path"])
    table = format_load(report)
    if report["errors"]:
        # The table first, then the command line's one-line error and exit status 1.
        sys.stdout.write(table)
        sys.stdout.flush()
        raise LoadErrors(
            f"{report['errors']} error(s) under load (see the table above); logs kept in {report['folder']}",
            code="load_errors",
        )
    return table


def _handle_bench_latency(options: dict[str, Any]) -> str:
    from fable_benchmarks.latency import bench_latency
    from fable_benchmarks.report import format_latency, write_json

    if options.get("datasets"):
        return _bench_corpus_latency(options)
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


def _bench_corpus_latency(options: dict[str, Any]) -> str:
    from fable_benchmarks.corpus_latency import Dataset, bench_corpus_latency
    from fable_benchmarks.report import format_corpus_latency, write_json

    datasets = []
    for values in options["datasets"]:
        if len(values) not in (2, 3):
            raise BenchInputError(
                f"--dataset takes DOCS QUERIES [COLLECTION], got {len(values)} value(s): {' '.join(values)}"
            )
        docs, queries = Path(values[0]), Path(values[1])
        _check_files("dataset", [docs, queries])
        datasets.append(Dataset(docs, queries, values[2] if len(values) == 3 else ""))
    if options["queries"] < 1:
        raise BenchInputError("--queries must be at least 1")
    report = bench_corpus_latency(datasets, queries=options["queries"], budget=options["budget"], log=_log)
    if options.get("json_path"):
        write_json(report, options["json_path"])
    return format_corpus_latency(report)


def _bench_cost_real(options: dict[str, Any], budget: int) -> str:
    from fable_benchmarks.cost_real import bench_cost_real
    from fable_benchmarks.report import format_cost_real, write_json

    queries_files = options["queries_file"]
    if len(queries_files) != len(options["docs"]):
        raise BenchInputError("--real-llm: give one --queries-file per --docs file, in the same order")
    _check_files("queries-file", queries_files)
    if options["skip_documents"] < 0 or options["time_limit"] < 0:
        raise BenchInputError("--skip-documents and --time-limit must be 0 (none) or more")
    report = bench_cost_real(
        datasets=list(zip(options["docs"], queries_files, strict=True)),
        ingest_limit=options["ingest_limit"],
        queries=options["queries"],
        budget=budget,
        local_model=options.get("local_model") or "",
        skip_documents=options["skip_documents"],
        time_limit_s=options["time_limit"],
        log=_log,
    )
    if options.get("json_path"):
        write_json(report, options["json_path"])
    return format_cost_real(report)


def _handle_bench_local_models(options: dict[str, Any]) -> str:
    from fable_benchmarks.local_models import bench_local_models
    from fable_benchmarks.report import format_local_models

    _check_files("docs", options["docs"])
    _check_files("queries-file", options["queries_file"])
    if len(options["queries_file"]) != len(options["docs"]):
        raise BenchInputError("give one --queries-file per --docs file, in the same order")
    if options["documents"] < 1 or options["queries"] < 1:
        raise BenchInputError("--documents and --queries must be at least 1")
    report = bench_local_models(
        datasets=list(zip(options["docs"], options["queries_file"], strict=True)),
        models=_comma_list(options["models"]),
        documents=options["documents"],
        queries=options["queries"],
        budget=_parse_budgets(str(options["budget"]))[0],
        base_url=options["base_url"],
        log=_log,
    )
    _save_json(options, report)
    return format_local_models(report)


def _handle_bench_cost(options: dict[str, Any]) -> str:
    from fable_benchmarks.cost import bench_cost
    from fable_benchmarks.report import format_cost

    _check_files("docs", options["docs"])
    if options["ingest_limit"] < 1:
        raise BenchInputError("--ingest-limit must be at least 1")
    scopes = _parse_scopes(options["scopes"])
    if options["queries"] < (0 if options.get("real_llm") else 1):
        raise BenchInputError("--queries must be at least 1 (0 with --real-llm: ingestion only)")
    if options["nodes_per_document"] < 8:
        raise BenchInputError("--nodes-per-document must be at least 8")
    budget = _parse_budgets(str(options["budget"]))[0]
    if options.get("real_llm"):
        return _bench_cost_real(options, budget)
    report = bench_cost(
        docs=options["docs"],
        ingest_limit=options["ingest_limit"],
        scope_sizes=scopes,
        queries=options["queries"],
        budget=budget,
        nodes_per_document=options["nodes_per_document"],
        log=_log,
    )
    _save_json(options, report)
    return format_cost(report)


def _parse_scopes(text: str) -> list[int]:
    """--scopes: document counts, smallest first, each at least 1."""
    try:
        scopes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise BenchInputError(f"--scopes: {text!r} is not a list of numbers, e.g. 10,100,1000") from None
    if not scopes or scopes[0] < 1:
        raise BenchInputError("--scopes: give one or more document counts of at least 1, e.g. 10,100,1000")
    return scopes


def _handle_bench_extract(options: dict[str, Any]) -> str:
    from fable_benchmarks.extraction import CANDIDATES, bench_extract, format_extract, queries_beside

    _check_files("files", [options["files"]])
    queries = options["queries"] or queries_beside(options["files"])
    _check_files("queries", [queries])
    candidates = _comma_list(options["candidates"]) or list(CANDIDATES)
    _check_choices("--candidates", candidates, CANDIDATES)
    if options["limit"] < 0:
        raise BenchInputError("--limit must be 0 (all) or more")
    rows = bench_extract(
        files_path=options["files"],
        queries_path=queries,
        candidates=candidates,
        limit=options["limit"],
        log=_log,
    )
    _save_json(options, {"rows": [row.as_json() for row in rows]})
    return format_extract(rows)


def _handle_bench_ocr(options: dict[str, Any]) -> str:
    from fable_benchmarks.ocr import bench_ocr, format_ocr

    if not 1 <= options["pages"] <= 2000:
        raise BenchInputError("--pages must be between 1 and 2000")
    dpis = _parse_dpis(options["dpi"])
    languages = tuple(part.strip() for part in options["languages"].split("+") if part.strip())
    if not languages:
        raise BenchInputError("--languages: give at least one, e.g. eng or eng+deu")
    rows = bench_ocr(pages=options["pages"], dpis=dpis, languages=languages, log=_log)
    _save_json(options, {"rows": [row.as_json() for row in rows]})
    return format_ocr(rows)


def _parse_dpis(text: str) -> list[int]:
    """--dpi: resolutions from 72 to 600, lowest first."""
    try:
        dpis = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise BenchInputError(f"--dpi {text!r}: give whole numbers, e.g. 200,300") from None
    if not dpis or not all(72 <= dpi <= 600 for dpi in dpis):
        raise BenchInputError("--dpi: give resolutions between 72 and 600, e.g. 200,300")
    return dpis


def _handle_bench_broker(options: dict[str, Any]) -> str:
    from fable_benchmarks.broker import BROKERS, broker_drain, format_drain

    pollings = [_parse_polling(part) for part in options["polling"].split(",")]
    brokers = _comma_list(options["brokers"])
    if unknown := [name for name in brokers if name not in BROKERS]:
        raise BenchInputError(f"--brokers: unknown {', '.join(unknown)}; choose among {', '.join(BROKERS)}")
    rows = [
        broker_drain(messages=options["messages"], broker=broker, polling_seconds=polling)
        for broker in brokers
        # Redis pushes messages to the worker (a blocking pop): no polling interval to vary.
        for polling in ([None] if broker == "redis" else pollings)
    ]
    return format_drain(rows)


def _parse_polling(part: str) -> float | None:
    """One --polling value: seconds, or None for the broker's default."""
    if part.strip() == "default":
        return None
    try:
        return float(part)
    except ValueError:
        raise BenchInputError(f"--polling: {part!r} is neither a number of seconds nor 'default'") from None


def _handle_bench_structure(options: dict[str, Any]) -> str:
    from fable_benchmarks.structure_report import format_details, format_rows, format_structure_table
    from fable_benchmarks.structure_run import bench_structure, generated_cases, select_cases

    formats = _comma_list(options["formats"])
    _check_choices("--formats", formats, STRUCTURE_FORMATS)
    if options["limit"] < 0:
        raise BenchInputError("--limit must be 0 (all) or more")
    cases = _cuad_cases(options) if "pdf" in formats else []
    cases += generated_cases(formats)
    cases = select_cases(cases, formats=formats, only=options["only"], limit=options["limit"])
    if not cases:
        raise BenchInputError("no document matches --formats, --only and --limit")
    run = bench_structure(cases, log=_log)
    rows = format_rows(run.scores)
    _save_json(
        options,
        {
            "rows": [row.as_json() for row in rows],
            "documents": [score.as_json() for score in run.scores],
            "seconds": run.seconds,
        },
    )
    table = format_structure_table(rows, total_seconds=run.seconds)
    return table + format_details(run.scores) if options["details"] else table


def _cuad_cases(options: dict[str, Any]) -> list[StructureCase]:
    """The pdf row's documents: CUAD contracts with hand-checked gold, when there is some."""
    from fable_benchmarks.structure_run import DEFAULT_CUAD_GOLD, cuad_cases

    gold = options["cuad_gold"] or DEFAULT_CUAD_GOLD
    if options["cuad_gold"] is not None:
        _check_files("cuad-gold", [gold])
    if gold.is_file():
        return cuad_cases(gold, options["pdf_dir"])
    _log(f"No hand-checked gold at {gold} yet: the pdf row is left out")
    return []
