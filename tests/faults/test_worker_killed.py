"""A Celery worker killed as a whole while it re-indexes a document (SIGKILL of the worker and its
pool child), with both brokers: the embedded filesystem one (the message is gone once fetched)
and Redis as production runs it (Debian's redis-server, started here; the message would sit
unacknowledged for the visibility timeout). The document keeps its previous tree the whole time,
and the next worker that starts queues the job again, so it is redelivered at once instead of
staying "indexing" forever. Real processes, real brokers, the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from django.db import connection

from documents.models import Document, IngestionJob, Node
from documents.services.documents import document_create, document_reindex
from documents.services.jobs import job_run_now
from openfable.celery import app as celery_app
from tests.conftest import REPO_ROOT
from tests.factories import CollectionFactory
from tests.faults.processes import redis_server, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.slow]

# Long enough that a re-index takes several seconds on two cores: there is time to kill it.
TEXT = "\n\n".join(
    f"Clause {n}. The supplier shall deliver lot {n} of the {['valves', 'pumps', 'seals', 'gauges'][n % 4]} "
    f"within {n + 3} days; a late lot {n} costs {n % 7 + 1} percent of its price for each week of delay, "
    f"and the buyer may inspect lot {n} at the supplier's plant number {n % 5 + 1} before it ships."
    for n in range(90)
)


@pytest.fixture(params=["filesystem", "redis"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A broker of the test's own, shared by this process and the workers it starts: a data
    folder for the workers, and the environment that points them at the broker."""
    previous = (celery_app.conf.broker_url, celery_app.conf.broker_transport_options)
    with ExitStack() as stack:
        if request.param == "filesystem":
            folders = {name: tmp_path / "broker" / name for name in ("queue", "control")}
            for folder in folders.values():
                folder.mkdir(parents=True)
            celery_app.conf.broker_url = "filesystem://"
            celery_app.conf.broker_transport_options = {
                "data_folder_in": str(folders["queue"]),
                "data_folder_out": str(folders["queue"]),
                "control_folder": str(folders["control"]),
            }
            # No longer the default: named, the workers find data_dir/broker/queue by themselves.
            environment: dict[str, str] = {"OPENFABLE_BROKER_URL": "filesystem://"}
        else:
            url = stack.enter_context(redis_server(tmp_path))
            celery_app.conf.broker_url = url
            celery_app.conf.broker_transport_options = {}
            environment = {"OPENFABLE_BROKER_URL": url}
        celery_app._after_fork()  # a producer pool made earlier points at another broker
        try:
            yield tmp_path, environment
        finally:
            celery_app.conf.broker_url, celery_app.conf.broker_transport_options = previous
            celery_app._after_fork()


def _start_worker(data_dir: Path, environment: dict[str, str], log: str) -> subprocess.Popen[bytes]:
    db = connection.settings_dict
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    env |= {
        "OPENFABLE_DATABASE_URL": f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
        "OPENFABLE_DATA_DIR": str(data_dir),  # its broker folder is data_dir/broker/queue
        "OPENFABLE_DEBUG": "true",
        **environment,
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "openfable",
            "worker",
            "--concurrency",
            "1",
            "--loglevel",
            "INFO",
        ],
        cwd=REPO_ROOT,
        env=env,
        start_new_session=True,  # its own process group: the kill takes the pool child too
        stdout=(data_dir / log).open("wb"),
        stderr=subprocess.STDOUT,
    )


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_reindex_loses_nothing_and_the_job_is_redelivered(
    broker: tuple[Path, dict[str, str]],
) -> None:
    data_dir, environment = broker
    document = document_create(collection=CollectionFactory.create(), content=TEXT, queue=False).document
    first = job_run_now(document_id=document.pk)
    assert first is not None and first.succeeded
    old_tree = sorted(Node.objects.filter(document=document).values_list("pk", flat=True))

    job = document_reindex(document=document)  # queued on commit, into the test's broker folder
    worker = _start_worker(data_dir, environment, "first-worker.log")
    try:
        wait_for(
            lambda: IngestionJob.objects.filter(pk=job.pk, status="running", progress__gte=5).exists(),
            timeout=120,
            what="the first worker to be well into the re-index",
        )
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)

    job.refresh_from_db()
    assert job.status == IngestionJob.Status.RUNNING and job.worker, "the dead worker could not say so"
    assert sorted(Node.objects.filter(document=document).values_list("pk", flat=True)) == old_tree

    replacement = _start_worker(data_dir, environment, "second-worker.log")
    try:
        wait_for(
            lambda: IngestionJob.objects.filter(pk=job.pk, status="succeeded").exists(),
            timeout=180,
            what="the job to be redelivered to the new worker and finish",
        )
    finally:
        replacement.send_signal(signal.SIGTERM)
        try:
            replacement.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(replacement.pid, signal.SIGKILL)
    document.refresh_from_db()
    assert document.status == Document.Status.INDEXED
    nodes = Node.objects.filter(document=document)
    assert not set(nodes.values_list("pk", flat=True)) & set(old_tree), "the new tree replaced the old one"
    leaves = nodes.filter(kind=Node.Kind.LEAF).order_by("order")
    assert "".join(leaf.content for leaf in leaves) == TEXT, "no half-written tree"
    job.refresh_from_db()
    assert job.node_count == nodes.count() and IngestionJob.objects.filter(document=document).count() == 2
