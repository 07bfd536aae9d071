"""`python -m fable_benchmarks bench-load`: concurrent users against the production-shaped server, in one command.

    .venv/bin/python -m fable_benchmarks bench-load --collection bench-docs_en-2986d6

(The real run; the defaults are its spec: 50 users for 120 s, then 200 users for 120 s, 20 CUAD
contracts ingesting meanwhile. A short try: ``--stages 5x15 --background-limit 2``.)

What it does, in order, on the database this command itself uses (the embedded dev database under
var/, started if needed, or ``OPENFABLE_DATABASE_URL``):

1. The corpus: ``--collection SLUG`` reuses an indexed collection; without it ``--docs`` (DragonBall
   by default) is indexed here into a throw-away collection (``fable_benchmarks.ingest``), deleted at the
   end unless ``--keep``.
2. A throw-away account: a user (member of that collection, not a superuser, so the visibility
   filters are exercised), its API token, and a collection of its own for the background ingest.
3. The servers (``fable_benchmarks.load_servers``), as docker-compose.yml runs them: gunicorn with ``--web-workers`` uvicorn workers
   (2 by default) and a Celery worker (concurrency 2), on a free local port. Debug off; plain HTTP
   (``OPENFABLE_HTTPS=false``: no redirect, no secure cookies, as on a private network). They get a
   private data folder, so their Celery queue (the embedded broker) is theirs alone; the API rate
   limit is lifted for the throw-away user only (``OPENFABLE_API_THROTTLE_RATES``: every simulated
   program shares its one token). Ready when ``/v1/api/health`` answers 200; a few unrecorded
   queries then load the embedding model in each web worker.
4. The background: the first ``--background-limit`` documents of ``--background-docs`` (CUAD) are
   posted to ``/v1/api/documents`` and the Celery worker indexes them while the users run.
5. Each stage (``USERSxSECONDS``) runs locust headless in its own process on
   ``fable_benchmarks/locustfile.py``: program users query ``POST /v1/api/query`` with an API token at a
   random budget among ``--budgets``; people (``--ui-share`` of the users) sign in through the form
   and open the corpus page, a document page and the query page. Each user waits a random
   0 to 2 x ``--think-seconds`` between requests.
6. The servers stop, the throw-away data goes, and the table comes out: per request kind the
   requests, errors, req/s, p50/p95/p99/max; the UI pages' p95; what became of the background
   documents. Any failed request, failed background document, or traceback in the web server's
   log is an error: the command then exits with status 1 (after the table) and keeps its folder of
   logs (its path is printed).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth import get_user_model

from documents.models import Collection, Document
from documents.selectors import collection_get, document_list
from documents.services.collections import collection_create, collection_delete, collection_update
from fable_benchmarks import BenchInputError
from fable_benchmarks.datasets import read_documents, read_queries
from fable_benchmarks.ingest import index_dataset_document
from fable_benchmarks.load_servers import server_log_problems, servers
from fable_benchmarks.metrics import percentile
from openfable.api_tokens import token_create
from openfable.embeddings import get_embedder
from openfable.errors import ServiceUnavailableError

Log = Callable[[str], None]
LOCUSTFILE = Path(__file__).with_name("locustfile.py")
STOP_TIMEOUT_SECONDS = 60  # a stage's end lets requests in flight finish (they are counted)
WARM_UP_ROUNDS = 2
QUERY_GROUP, PAGE_GROUP, SIGN_IN_GROUP = "queries (all budgets)", "UI pages (all)", "sign-in (all)"


class LoadErrors(ServiceUnavailableError):
    """Requests failed, a background document failed, or the web server logged a traceback."""


@dataclass(frozen=True)
class Stage:
    users: int
    seconds: int


@dataclass(frozen=True)
class LoadOptions:
    stages: Sequence[Stage]
    budgets: Sequence[int]
    queries_path: Path
    collection_slug: str = ""  # reuse this indexed collection; else docs_path is indexed
    docs_path: Path | None = None
    docs_limit: int = 0
    background_path: Path | None = None
    background_limit: int = 20
    ui_share: float = 0.2
    think_seconds: float = 1.0
    spawn_rate: float = 10.0
    web_workers: int = 2
    keep: bool = False


@dataclass
class KindStats:
    """One row of the table: the requests of one kind (or a group of kinds) in one stage."""

    kind: str
    requests: int
    errors: int
    per_second: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    cached: int = 0

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


@dataclass
class StageResult:
    stage: Stage
    rows: list[KindStats]
    errors: list[tuple[str, str, int]] = field(default_factory=list)  # (kind, message, count)

    def as_json(self) -> dict[str, Any]:
        return {
            "users": self.stage.users,
            "seconds": self.stage.seconds,
            "rows": [{**vars(row), "error_rate": row.error_rate} for row in self.rows],
            "errors": [{"kind": kind, "message": message, "count": n} for kind, message, n in self.errors],
        }


# -- the statistics (pure) -----------------------------------------------------------------------


def group_of(kind: str) -> str:
    if kind.startswith("query "):
        return QUERY_GROUP
    if kind.startswith("page: "):
        return PAGE_GROUP
    if kind.startswith("sign-in: "):
        return SIGN_IN_GROUP
    return kind


def _stats(kind: str, records: Sequence[dict[str, Any]], seconds: float) -> KindStats:
    times = [float(record["ms"]) for record in records]
    return KindStats(
        kind=kind,
        requests=len(records),
        errors=sum(1 for record in records if record.get("error")),
        per_second=round(len(records) / seconds, 2) if seconds else 0.0,
        p50_ms=round(percentile(times, 50), 1),
        p95_ms=round(percentile(times, 95), 1),
        p99_ms=round(percentile(times, 99), 1),
        max_ms=round(max(times, default=0.0), 1),
        cached=sum(1 for record in records if record.get("cached")),
    )


def _kind_order(kind: str) -> tuple[int, int, str]:
    groups = [QUERY_GROUP, PAGE_GROUP, SIGN_IN_GROUP]
    group = group_of(kind)
    rank = groups.index(group) if group in groups else len(groups)
    budget = int(kind.split()[1]) if kind.startswith("query ") and kind.split()[1].isdigit() else 0
    return rank, budget, kind


def summarise(records: Sequence[dict[str, Any]], seconds: float) -> list[KindStats]:
    """Rows per group (queries, UI pages, sign-in) followed by their kinds, then every request."""
    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_kind[str(record["name"])].append(record)
    rows: list[KindStats] = []
    for group in (QUERY_GROUP, PAGE_GROUP, SIGN_IN_GROUP):
        rows += _group_rows(group, by_kind, seconds)
    rows += [
        _stats(kind, by_kind[kind], seconds)
        for kind in sorted(by_kind)
        if group_of(kind) not in (QUERY_GROUP, PAGE_GROUP, SIGN_IN_GROUP)
    ]
    rows.append(_stats("all requests", records, seconds))
    return rows


def _group_rows(group: str, by_kind: dict[str, list[dict[str, Any]]], seconds: float) -> list[KindStats]:
    """The group's row (all its kinds together), then one per kind; none if no kind is in it."""
    kinds = sorted((kind for kind in by_kind if group_of(kind) == group), key=_kind_order)
    if not kinds:
        return []
    together = _stats(group, [record for kind in kinds for record in by_kind[kind]], seconds)
    return [together, *(_stats(kind, by_kind[kind], seconds) for kind in kinds)]


def error_counts(records: Sequence[dict[str, Any]], limit: int = 10) -> list[tuple[str, str, int]]:
    counted = Counter(
        (str(record["name"]), str(record["error"])) for record in records if record.get("error")
    )
    return [(kind, message, n) for (kind, message), n in counted.most_common(limit)]


# -- the run -------------------------------------------------------------------------------------


def bench_load(options: LoadOptions, *, log: Log | None = None) -> dict[str, Any]:
    say: Log = log or (lambda message: None)
    queries = [query.text for query in read_queries(options.queries_path) if query.text.strip()]
    if not queries:
        raise BenchInputError(f"--queries {options.queries_path}: no query has text")
    folder = Path(tempfile.mkdtemp(prefix="openfable-load-"))
    undo: list[Callable[[], object]] = []  # throw-away data, removed in reverse order at the end
    report: dict[str, Any] = {"folder": str(folder), "web_workers": options.web_workers}
    try:
        corpus = _corpus(options, say, undo)
        document_ids = _indexed_documents(corpus)
        report |= {"collection": corpus.slug, "documents": len(document_ids)}
        user, password, key = _throw_away_account(corpus, undo)
        username = user.get_username()
        background = collection_create(name=f"bench-load background {uuid.uuid4().hex[:6]}", owner=user)
        undo.append(lambda: collection_delete(collection=background))
        plan = {
            "token": key,
            "username": username,
            "password": password,
            "collection": corpus.slug,
            "queries": queries,
            "budgets": list(options.budgets),
            "document_ids": document_ids,
            "think_seconds": options.think_seconds,
            "ui_share": options.ui_share,
        }
        plan_path = _write_plan(folder, plan)
        with servers(folder, web_workers=options.web_workers, unthrottled=username, log=say) as base_url:
            api = httpx.Client(
                base_url=f"{base_url}/v1/api", headers={"Authorization": f"Bearer {key}"}, timeout=120
            )
            _warm_up(api, queries=queries, collection=corpus.slug, workers=options.web_workers)
            queued = _queue_background(api, options, collection=background.slug, log=say)
            stages = _run_stages(options, base_url=base_url, plan=plan_path, say=say)
            report["background"] = _background_state(background, queued=queued)
        report["stages"] = [stage.as_json() for stage in stages]
        report["server_log_problems"] = server_log_problems(folder / "web.log")
        report["errors"] = _error_total(report)
    finally:
        for step in reversed(undo):
            step()
        if report.get("errors") == 0:
            shutil.rmtree(folder, ignore_errors=True)
    return report


def _indexed_documents(corpus: Collection) -> list[int]:
    """The pks of the collection's indexed documents, the ones a query may name."""
    indexed = document_list(user=None, collection=corpus, status=Document.Status.INDEXED)
    document_ids = list(indexed.values_list("pk", flat=True))
    if not document_ids:
        raise BenchInputError(f"The collection {corpus.slug!r} has no indexed document to query.")
    return document_ids


def _write_plan(folder: Path, plan: dict[str, Any]) -> Path:
    """What the Locust users read: the account, the queries and the documents to ask about."""
    plan_path = folder / "plan.json"
    plan_path.write_text(json.dumps(plan))
    plan_path.chmod(0o600)  # it holds a key and a password, if only throw-away ones
    return plan_path


def _run_stages(options: LoadOptions, *, base_url: str, plan: Path, say: Log) -> list[StageResult]:
    stages = []
    for number, stage in enumerate(options.stages, 1):
        say(f"stage {number}: {stage.users} users for {stage.seconds} s")
        records = _run_stage(stage, number=number, base_url=base_url, plan=plan, options=options)
        stages.append(
            StageResult(stage=stage, rows=summarise(records, stage.seconds), errors=error_counts(records))
        )
    return stages


def _error_total(report: dict[str, Any]) -> int:
    """Failed requests of every stage, failed background jobs, and problems in the server's log."""
    failed_requests = sum(
        row["errors"] for stage in report["stages"] for row in stage["rows"] if row["kind"] == "all requests"
    )
    return failed_requests + report["background"]["failed"] + len(report["server_log_problems"])


def _corpus(options: LoadOptions, say: Log, undo: list[Callable[[], object]]) -> Collection:
    if options.collection_slug:
        return collection_get(user=None, collection=options.collection_slug)
    if options.docs_path is None:
        raise BenchInputError("Give --collection SLUG (an indexed collection) or --docs PATH to index.")
    items = read_documents(options.docs_path, options.docs_limit)
    collection = collection_create(name=f"bench-load {options.docs_path.stem} {uuid.uuid4().hex[:6]}")
    if options.keep:
        say(f"keeping collection {collection.slug} (reuse it with --collection {collection.slug})")
    else:
        undo.append(lambda: collection_delete(collection=collection))
    embedder = get_embedder()
    for number, item in enumerate(items, 1):
        indexed = index_dataset_document(collection=collection, item=item, embedder=embedder)
        if indexed.error is not None:
            say(f"FAILED {item.doc_id}: {indexed.error}")
        say(f"indexed {number}/{len(items)}: {item.title}")
    return collection


def _throw_away_account(corpus: Collection, undo: list[Callable[[], object]]) -> tuple[Any, str, str]:
    """A plain user who may see the corpus (a member), with a token; deleting it takes both."""
    username = f"bench-load-{secrets.token_hex(4)}"
    password = secrets.token_urlsafe(16)
    user = get_user_model().objects.create_user(username=username, password=password)
    undo.append(user.delete)  # takes its token and its membership
    # The operator running the benchmark makes its own account a member at once (no invitation).
    collection_update(collection=corpus, members=[*corpus.members.all(), user], members_at_once=True)
    _token, key = token_create(user=user, name="bench-load")
    return user, password, key


def _warm_up(api: httpx.Client, *, queries: Sequence[str], collection: str, workers: int) -> None:
    """Unrecorded queries, several at once, so that each web worker has loaded the embedding model."""

    def ask(text: str) -> None:
        answer = api.post("/query", json={"query": text, "token_budget": 1000, "collection": collection})
        if answer.status_code != 200:
            raise ServiceUnavailableError(
                f"A warm-up query failed: HTTP {answer.status_code} {answer.text[:300]}"
            )

    with ThreadPoolExecutor(max_workers=2 * workers) as pool:
        list(pool.map(ask, [queries[n % len(queries)] for n in range(WARM_UP_ROUNDS * 2 * workers)]))


def _queue_background(api: httpx.Client, options: LoadOptions, *, collection: str, log: Log) -> int:
    if options.background_path is None or options.background_limit == 0:
        return 0
    items = read_documents(options.background_path, options.background_limit)
    for item in items:
        answer = api.post(
            "/documents",
            json={
                "text": item.content,
                "title": item.title,
                "collection": collection,
                "metadata": {"doc_id": item.doc_id},
            },
        )
        if answer.status_code not in (200, 202):
            raise ServiceUnavailableError(
                f"Queueing the background document {item.doc_id} failed: HTTP {answer.status_code} {answer.text[:300]}"
            )
    log(f"queued {len(items)} background documents from {options.background_path.name}")
    return len(items)


def _run_stage(
    stage: Stage, *, number: int, base_url: str, plan: Path, options: LoadOptions
) -> list[dict[str, Any]]:
    records = plan.parent / f"stage-{number}.jsonl"
    command = [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
        "--host", base_url,
        "--users", str(stage.users),
        "--spawn-rate", str(options.spawn_rate),
        "--run-time", f"{stage.seconds}s",
        "--stop-timeout", str(STOP_TIMEOUT_SECONDS),
        "--loglevel", "WARNING",
    ]  # fmt: skip
    environment = {**os.environ, "OPENFABLE_LOAD_PLAN": str(plan), "OPENFABLE_LOAD_RECORDS": str(records)}
    log_path = plan.parent / f"locust-{number}.log"
    with log_path.open("wb") as out:
        # Status 1 is locust's "some requests failed": those are in the records and counted there.
        done = subprocess.run(
            command,
            cwd=settings.BASE_DIR,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=stage.seconds + STOP_TIMEOUT_SECONDS + 120,
            check=False,
        )
    if done.returncode not in (0, 1) or not records.exists():
        raise ServiceUnavailableError(
            f"locust ended with status {done.returncode} without its records; its log: {log_path}"
        )
    return [json.loads(line) for line in records.read_text().splitlines() if line.strip()]


def _background_state(collection: Collection, *, queued: int) -> dict[str, Any]:
    statuses = Counter(document_list(user=None, collection=collection).values_list("status", flat=True))
    failed = statuses.get(Document.Status.FAILED, 0)
    return {
        "queued": queued,
        "indexed": statuses.get(Document.Status.INDEXED, 0),
        "failed": failed,
        "unfinished": queued - statuses.get(Document.Status.INDEXED, 0) - failed,
        "indexing": statuses.get(Document.Status.INDEXING, 0),  # of the unfinished: the worker is on it
    }
