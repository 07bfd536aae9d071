"""The embedded PostgreSQL starts when a test first needs the database, not when the settings load.

A pytest plugin (``-p tests.embedded_database`` in pyproject's addopts), imported before
pytest-django loads the settings: it tells them not to start the server
(``openfable.embedded_db.START_WITH_SETTINGS``), and starts it in the session fixture that runs
before the test database is made. Collecting the suite, or running tests that never touch the
database, starts nothing. With ``OPENFABLE_DATABASE_URL`` set there is nothing to start.
"""

from __future__ import annotations

import fcntl

import pytest

from openfable import embedded_db

embedded_db.START_WITH_SETTINGS = False


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """pytest-django's hook before it makes the test database: start the embedded server here and
    point the connection at the socket it listens on. One process at a time (pytest-xdist's
    workers each come here): a new cluster is made, started, stopped and started again with its
    settings, which a second process must not do at the same time."""
    from django.conf import settings
    from django.db import connections

    if settings.DATABASE_URL:
        return
    folder = settings.EMBEDDED_DATABASE_DIR
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / "postgres-start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        started = embedded_db.ensure_running(folder)
    for database in (settings.DATABASES["default"], connections["default"].settings_dict):
        database["HOST"] = started.socket_dir
