from __future__ import annotations

from django.apps import AppConfig


class CliConfig(AppConfig):
    name = "cli"
    verbose_name = "OpenFable command line"
