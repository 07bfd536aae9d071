"""How fast a real Celery worker drains a broker (`python -m fable_benchmarks bench-broker`).

``count`` ingestion messages for documents that do not exist (each task claims nothing and returns:
the broker's own cost, not indexing) are queued into a broker of the run's own, then one worker,
started as ``make run`` starts it, drains them. The time is read from the worker's own log: from
the first message it received to the last one it finished, so the worker's start-up is not
counted. Needs the database the app is configured with (the tasks look their document up).

The brokers compared: ``redis``, the embedded Redis server ``make run`` starts (its data folder
the run's own); ``filesystem``, kombu's filesystem transport, the embedded default before it
(it handed workers half-written messages under load); ``sqlalchemy``, kombu's SQL transport on
the app's own PostgreSQL (needs the SQLAlchemy package, which the app does not install; its
tables stay in that database), at kombu's own polling interval: it hands every transport option
to SQLAlchemy's ``create_engine``, which refuses ``polling_interval``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

from fable_benchmarks import BenchInputError
from openfable import embedded_broker
from openfable.runner import worker_command

_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): ")
_FIRST_ID = 2_000_000_000  # no document has such an id: each task finds nothing to do
BROKERS = ("redis", "filesystem", "sqlalchemy")


@dataclass(frozen=True)
class DrainRow:
    broker: str
    polling_seconds: float | None  # None: the app's (OPENFABLE_BROKER_POLLING_SECONDS unset)
    messages: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0


def broker_drain(
    *, messages: int, broker: str = "redis", polling_seconds: float | None = None, timeout: float = 900
) -> DrainRow:
    """Queue ``messages`` no-op ingestion messages, let one worker drain them; the time it took."""
    if messages < 1:
        raise BenchInputError("--messages must be at least 1.")
    if broker not in BROKERS:
        raise BenchInputError(f"unknown broker {broker!r}; choose among {', '.join(BROKERS)}")
    with tempfile.TemporaryDirectory(prefix="openfable-bench-broker-") as folder, ExitStack() as stack:
        environment = _environment(Path(folder), broker, polling_seconds)
        if broker == "redis":  # the app's default: the embedded server of the data folder
            stack.enter_context(embedded_broker.running(embedded_broker.broker_dir(Path(folder))))
        _queue(environment, messages)
        log = Path(folder) / "worker.log"
        worker = subprocess.Popen(
            worker_command(),
            cwd=settings.BASE_DIR,
            env=environment,
            start_new_session=True,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_until_drained(worker, log, messages=messages, timeout=timeout)
        finally:
            _stop(worker)
        lines = log.read_text(errors="replace").splitlines()
    received, finished = _stamps(lines, " received"), _stamps(lines, " succeeded in ")
    return DrainRow(
        broker=broker,
        polling_seconds=polling_seconds,
        messages=messages,
        seconds=round((max(finished) - min(received)).total_seconds(), 2),
    )


def _wait_until_drained(worker: subprocess.Popen[bytes], log: Path, *, messages: int, timeout: float) -> None:
    """Until the worker's log shows every message done; an error if it stops or runs out of time."""
    deadline = time.monotonic() + timeout
    while log.read_text(errors="replace").count(" succeeded in ") < messages:
        if worker.poll() is not None or time.monotonic() > deadline:
            raise BenchInputError(f"the worker did not drain the queue; its log:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


def _stop(worker: subprocess.Popen[bytes]) -> None:
    # To the worker itself, as make run stops it: a pool child that got the signal too
    # could die holding the pool's queue lock, and the worker would wait for it forever.
    worker.terminate()
    try:
        worker.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)


def _stamps(lines: list[str], event: str) -> list[datetime]:
    """When the worker logged ``event`` (" received", " succeeded in "), line by line."""
    return [_stamp(line) for line in lines if event in line and _STAMP.match(line)]


def _stamp(line: str) -> datetime:
    found = _STAMP.match(line)
    assert found is not None
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f")


def _database_url() -> str:
    """The database this process uses (under the tests, the test database), as a URL."""
    db = connection.settings_dict
    user = quote(str(db["USER"] or ""), safe="")
    if db["PASSWORD"]:
        user += ":" + quote(str(db["PASSWORD"]), safe="")
    host = str(db["HOST"] or db.get("OPTIONS", {}).get("host") or "")
    if host.startswith("/"):  # a Unix socket folder, as the embedded server's
        return f"postgresql://{user}@/{db['NAME']}?host={quote(host, safe='/')}"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgresql://{user}@{host}{port}/{db['NAME']}"


def _environment(folder: Path, broker: str, polling_seconds: float | None) -> dict[str, str]:
    url = _database_url()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    environment |= {
        "OPENFABLE_DATABASE_URL": url,
        "OPENFABLE_DATA_DIR": str(folder),  # the broker's folders are under it
        "OPENFABLE_DEBUG": "true",
        "OPENFABLE_SECRET_KEY": "bench-broker-only",
    }
    if broker == "filesystem":
        environment["OPENFABLE_BROKER_URL"] = "filesystem://"
    elif broker == "sqlalchemy":
        environment["OPENFABLE_BROKER_URL"] = "sqla+" + url.replace(
            "postgresql://", "postgresql+psycopg://", 1
        )
    if polling_seconds is not None:
        environment["OPENFABLE_BROKER_POLLING_SECONDS"] = str(polling_seconds)
    return environment


def _queue(environment: dict[str, str], messages: int) -> None:
    script = (
        "import sys\n"
        "from documents.tasks import run_ingestion_job\n"
        "for n in range(int(sys.argv[1])):\n"
        f"    run_ingestion_job.delay({_FIRST_ID} + n)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup()\n{script}", str(messages)],
        cwd=settings.BASE_DIR,
        env=environment | {"DJANGO_SETTINGS_MODULE": "openfable.settings"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise BenchInputError(f"could not queue the messages: {done.stderr.strip()[-2000:]}")


def format_drain(rows: list[DrainRow]) -> str:
    """The markdown table ``python -m fable_benchmarks bench-broker`` prints."""
    lines = [
        "| broker | polling interval | messages | drained in | per second | 10,000 messages |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        if row.broker == "redis":
            interval = "none (blocking pop)"
        elif row.broker == "sqlalchemy":
            interval = "kombu's 1 s"
        else:
            interval = "default" if row.polling_seconds is None else f"{row.polling_seconds:g} s"
        minutes = 10_000 / row.per_second / 60 if row.per_second else float("inf")
        lines.append(
            f"| {row.broker} | {interval} | {row.messages} | {row.seconds:.1f} s | {row.per_second:.1f} "
            f"| {minutes:.1f} min |"
        )
    return "\n".join(lines)
