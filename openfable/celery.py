"""The Celery application: JSON only, configured from Django settings (CELERY_* names)."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openfable.settings")

app = Celery("openfable")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _ensure_filesystem_broker_folders(sender: Celery, **kwargs: object) -> None:
    # kombu's filesystem transport expects its folders to exist.
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        if options.get(key):
            os.makedirs(options[key], exist_ok=True)


def queue_task(name: str, *args: object) -> None:
    """Queue the registered task ``name`` with JSON arguments.

    Services queue their tasks by name: the task modules import the services they wrap, so a
    direct import back would make an import cycle. The task is looked up in the registry, so
    eager mode (OPENFABLE_CELERY_EAGER) and the task's own options apply as with ``.delay()``.
    """
    app.signature(name, args=args).delay()
