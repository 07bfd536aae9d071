"""The Celery worker, started as docker-compose.yml and ``make run`` start it, fails a stalled job
on its own timer: no page, endpoint or command has to be read for it (reads write nothing).
A real worker process on the embedded filesystem broker, the test database."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from django.db import connection
from django.utils import timezone

from documents.models import Document, IngestionJob
from documents.services.documents import document_create
from documents.services.jobs import job_claim
from openfable.runner import worker_command
from tests.conftest import REPO_ROOT
from tests.factories import CollectionFactory
from tests.faults.processes import app_environment, stop_process, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_compose_worker_runs_the_sweep_that_make_run_runs() -> None:
    compose = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["worker"]["command"].split() == ["celery", *worker_command()[3:]]


def test_a_running_worker_fails_a_stalled_job_on_its_timer(tmp_path: Path, broker_url: str) -> None:
    db = connection.settings_dict
    env = app_environment(
        database_url=f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
        broker_url=broker_url,
        data_dir=str(tmp_path / "data"),
        debug="true",
        job_sweep_seconds="1",
    )
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        worker_command(),
        cwd=REPO_ROOT,
        env=env,
        start_new_session=True,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: " ready." in log.read_text(errors="replace"), timeout=120, what="the worker")
        # Made after the worker started (its start sweep is over): only its timer can fail it.
        document = document_create(
            collection=CollectionFactory.create(), content="Tides.", queue=False
        ).document
        job = job_claim(document_id=document.pk, worker="elsewhere:1")
        assert job is not None
        IngestionJob.objects.filter(pk=job.pk).update(heartbeat=timezone.now() - timedelta(hours=1))

        def failed() -> bool:
            job.refresh_from_db()
            return job.status == IngestionJob.Status.FAILED

        wait_for(failed, timeout=30, what="the worker's sweep to fail the stalled job")
        assert "The worker stopped while indexing" in job.error
        assert Document.objects.get(pk=document.pk).status == Document.Status.FAILED
    finally:
        stop_process(worker)
        print(log.read_text(errors="replace")[-4000:])
