"""The Celery application: JSON only, configured from Django settings (CELERY_* names)."""

from __future__ import annotations

import os
from importlib import import_module

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
    """Queue the task ``name`` ("package.module.function") with JSON arguments, after importing its module.

    Services queue their tasks by name: the task modules import the services they wrap, so a
    direct import back would make an import cycle. The task object itself is used (not
    ``send_task``), so eager mode (OPENFABLE_CELERY_EAGER) and the task's own options apply.
    """
    import_module(name.rsplit(".", 1)[0])  # registers the task in this process
    app.tasks[name].delay(*args)
