from __future__ import annotations

from django.apps import AppConfig


class DocumentsConfig(AppConfig):
    name = "documents"
    verbose_name = "Corpus"

    def ready(self) -> None:
        from documents import checks, receivers  # noqa: F401  (registers and connects them)
