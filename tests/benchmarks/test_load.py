"""`python -m fable_benchmarks bench-load`: the statistics on plain records, the server commands against
docker-compose.yml, and (slow) one short real run: gunicorn with two uvicorn workers, a Celery
worker and locust, on a corpus of three small documents with one more ingesting meanwhile."""

from __future__ import annotations

import json
import re
import shlex
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.conf import global_settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from pytest_django.fixtures import Settings

from documents.models import Collection
from fable_benchmarks.command import BenchCommand
from fable_benchmarks.load import error_counts, summarise
from fable_benchmarks.load_servers import web_command
from openfable.runner import worker_command
from tests.conftest import REPO_ROOT

DOCUMENTS = [
    {
        "doc_id": 1,
        "company_name": "Skerryvane lighthouse",
        "content": "# Skerryvane lighthouse\n\n## Keepers\n\nThe lamp is cleaned every Tuesday by the keeper "
        "Morag Baird, who climbs the one hundred and forty steps before dawn.\n\n## Supplies\n\n"
        "Paraffin, bread and letters reach the rock by the tender Hesperus once a fortnight.",
    },
    {
        "doc_id": 2,
        "company_name": "Corner bakery",
        "content": "# Corner bakery\n\n## Opening hours\n\nThe bakery on Quay Street opens at six and sells "
        "rye loaves until they run out.\n\n## Staff\n\nTwo bakers start at three in the morning.",
    },
    {
        "doc_id": 3,
        "company_name": "Harbour board",
        "content": "# Harbour board\n\n## Fees\n\nA mooring costs twelve pounds a night in summer.\n\n"
        "## Dredging\n\nThe channel is dredged every spring before the regatta.",
    },
]
BACKGROUND = {
    "doc_id": "contract-1",
    "company_name": "Supply agreement",
    "content": "# Supply agreement\n\n## 1. Term\n\nThis agreement runs for two years.\n\n"
    "## 2. Termination\n\nEither party may end it with ninety days' written notice.",
}
QUESTIONS = ["Who cleans the lamp?", "When does the bakery open?", "How much is a mooring?"]


def _records(name: str, times: list[float], errors: int = 0) -> list[dict[str, object]]:
    return [
        {"name": name, "ms": ms, "error": "HTTP 500: boom" if n < errors else None, "cached": False}
        for n, ms in enumerate(times)
    ]


def test_the_rows_group_queries_pages_and_sign_ins_with_their_percentiles_and_errors() -> None:
    records = (
        _records("query 8000", [40.0, 50.0])
        + _records("query 500", [float(ms) for ms in range(1, 101)], errors=3)
        + _records("page: corpus", [200.0, 400.0])
        + _records("sign-in: submit", [900.0])
    )
    rows = {row.kind: row for row in summarise(records, seconds=10)}
    assert [kind for kind in rows] == [
        "queries (all budgets)", "query 500", "query 8000", "UI pages (all)", "page: corpus",
        "sign-in (all)", "sign-in: submit", "all requests",
    ]  # fmt: skip
    assert rows["query 500"].requests == 100 and rows["query 500"].errors == 3
    assert rows["query 500"].p50_ms == 50.5 and rows["query 500"].p99_ms == 99.0
    assert rows["queries (all budgets)"].requests == 102 and rows["queries (all budgets)"].errors == 3
    assert rows["UI pages (all)"].p95_ms == 390.0 and rows["UI pages (all)"].max_ms == 400.0
    assert rows["all requests"].requests == 105 and rows["all requests"].per_second == 10.5
    assert rows["all requests"].error_rate == pytest.approx(3 / 105)
    assert error_counts(records) == [("query 500", "HTTP 500: boom", 3)]


def test_the_servers_run_the_commands_of_docker_compose() -> None:
    services = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]
    compose_web = shlex.split(re.sub(r"\$\{OPENFABLE_WEB_WORKERS:-\d+\}", "2", services["web"]["command"]))
    ours = web_command(port=8000, workers=2)
    assert ours[1:3] == ["-m", "gunicorn"]
    compose_web[compose_web.index("--bind") + 1] = "127.0.0.1:8000"  # a local port instead of 0.0.0.0
    assert ours[3:] == compose_web[1:]
    assert worker_command()[1:] == ["-m", *shlex.split(services["worker"]["command"])]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the servers read what this process wrote: committed
def test_a_short_run_serves_every_request_and_leaves_nothing_behind(
    tmp_path: Path, settings: Settings
) -> None:
    # The load's UI users sign in to the web server it starts, which runs the real settings: their
    # passwords are hashed as there, not with the tests' fast hasher (tests/conftest.py).
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    docs, queries, background = tmp_path / "docs.jsonl", tmp_path / "queries.jsonl", tmp_path / "bg.jsonl"
    docs.write_text("".join(json.dumps(document) + "\n" for document in DOCUMENTS))
    queries.write_text("".join(json.dumps({"query": {"content": text}}) + "\n" for text in QUESTIONS))
    background.write_text(json.dumps(BACKGROUND) + "\n")
    out = StringIO()
    call_command(
        BenchCommand(), "bench-load", "--docs", str(docs), "--queries", str(queries),
        "--background-docs", str(background), "--background-limit", "1", "--stages", "3x8",
        "--ui-share", "0.34", "--think-seconds", "0.3", "--spawn-rate", "3", "--budgets", "300,1000",
        "--json", str(tmp_path / "load.json"), stdout=out,
    )  # fmt: skip
    table = out.getvalue()
    report = json.loads((tmp_path / "load.json").read_text())
    rows = {row["kind"]: row for row in report["stages"][0]["rows"]}
    assert report["errors"] == 0 and rows["all requests"]["errors"] == 0, table
    assert rows["queries (all budgets)"]["requests"] >= 5, table
    assert {"query 300", "query 1000"} <= set(rows), table
    assert rows["UI pages (all)"]["requests"] >= 2 and rows["sign-in: submit"]["requests"] == 1, table
    assert report["background"]["queued"] == 1 and report["background"]["failed"] == 0
    assert report["documents"] == 3 and report["web_workers"] == 2
    for heading in ("| request kind | requests | errors | error % | req/s | p50 ms | p95 ms | p99 ms |",
                    "| **queries (all budgets)** |", "| **UI pages (all)** |", "| page: document |",
                    "UI pages p95: ", "Errors: 0"):  # fmt: skip
        assert heading in table, table
    # The throw-away account, its collection and the indexed corpus are gone; so is the log folder.
    assert not Collection.objects.exists()
    assert not get_user_model().objects.filter(username__startswith="bench-load").exists()
    assert not Path(report["folder"]).exists()
