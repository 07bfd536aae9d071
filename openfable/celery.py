"""The Celery application: JSON only, configured from Django settings (CELERY_* names)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from celery import Celery

from openfable.worker_heartbeat import HeartbeatStep

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openfable.settings")

app = Celery("openfable")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Every worker writes a heartbeat while it runs, so that the health check tells busy from dead.
app.steps["worker"].add(HeartbeatStep)


@app.on_after_configure.connect
def _ensure_filesystem_broker_folders(sender: Celery, **kwargs: object) -> None:
    # kombu's filesystem transport expects its folders to exist.
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        if options.get(key):
            os.makedirs(options[key], exist_ok=True)


@contextmanager
def probe_app() -> Iterator[Celery]:
    """A Celery app of its own on ``app``'s broker, for the health checks; closed after use.

    Its connection and producer pools are its own: a worker ping takes two connections at once,
    and from the shared pools a burst of pings held them all, so that every upload waited for a
    connection to queue its task (openfable.health).
    """
    probe = Celery("openfable-probe", set_as_current=False)
    probe.conf.update(
        broker_url=app.conf.broker_url,
        broker_transport_options=app.conf.broker_transport_options,
        broker_connection_timeout=2.0,
        broker_connection_retry=False,
        control_exchange=app.conf.control_exchange,
        accept_content=app.conf.accept_content,
        task_serializer=app.conf.task_serializer,
    )
    try:
        yield probe
    finally:
        probe.close()
