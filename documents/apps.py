from __future__ import annotations

from django.apps import AppConfig


class DocumentsConfig(AppConfig):
    name = "documents"
    verbose_name = "Corpus"

    def ready(self) -> None:
        # checks and receivers register and connect themselves; tasks plugs the Celery tasks into
        # the seam the services queue work through (documents.services.background), in every
        # process, not only the worker that autodiscovers them.
        from documents import checks, receivers, tasks  # noqa: F401
