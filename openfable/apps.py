from __future__ import annotations

from django.apps import AppConfig


class OpenFableConfig(AppConfig):
    name = "openfable"
    verbose_name = "OpenFable"

    def ready(self) -> None:
        from openfable import checks  # noqa: F401  (registers the system checks)
