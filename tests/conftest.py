from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# The scripted OpenAI-compatible server, for every test that speaks to an LLM or embedder.
pytest_plugins = ["tests.fakes.fixtures"]


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """pytest-django's hook before it makes the test database: the embedded server starts here,
    when the first test needs the database (``tests.embedded_database``)."""
    from tests.embedded_database import start_embedded_database

    start_embedded_database()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser tests run last: Playwright keeps an event loop on the main thread for the rest
    of the session, which no other test should have to work around. The few that take minutes
    (``starts_first``) run first: begun last, one of them would keep one worker busy alone while
    the other has finished."""
    items.sort(
        key=lambda item: ("tests/browser/" in str(item.path), item.get_closest_marker("starts_first") is None)
    )


@pytest.fixture(scope="session")
def live_server(request: pytest.FixtureRequest) -> Iterator[Any]:
    """pytest-django's live server, answering without Nagle's delay.

    Django's test server writes a response's head and body in two sends. With Nagle's algorithm
    on, the body waits until the client acknowledges the head, and the client (delayed ACK)
    waits up to 40 ms for more before it does: every request to the live server cost 40 ms of
    sleep, 90 of the 130 s of the schemathesis run. TCP_NODELAY on each connection sends the body
    at once. (Production serves through a real server; this is the test server's alone.)"""
    from django.core.servers.basehttp import ThreadedWSGIServer
    from pytest_django.live_server_helper import LiveServer

    class NoDelayServer(ThreadedWSGIServer):
        def get_request(self) -> tuple[socket.socket, Any]:
            connection, address = super().get_request()
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return connection, address

    address = (
        request.config.getvalue("liveserver") or os.getenv("DJANGO_LIVE_TEST_SERVER_ADDRESS") or "localhost"
    )
    server = LiveServer(address, start=False)
    server.thread.server_class = NoDelayServer
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session", autouse=True)
def fast_password_hashing() -> Iterator[None]:
    """Passwords hashed with MD5 in this process's tests: PBKDF2's 1.2 million rounds cost about a
    second per sign-in and per user with a password here, which added a minute or more to the
    suite and tested nothing. PBKDF2 stays listed, so that its hashes still verify (a test
    that Django re-hashes them at sign-in uses one). Processes the tests start run the real
    settings: a test whose users sign in to a server process it starts hashes their passwords
    with the real hashers (``settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS``, as
    tests/benchmarks/test_load.py does)."""
    from django.test import override_settings

    with override_settings(
        PASSWORD_HASHERS=[
            "django.contrib.auth.hashers.MD5PasswordHasher",
            "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        ]
    ):
        yield


@pytest.fixture(scope="session", autouse=True)
def session_broker() -> Iterator[str]:
    """One embedded Redis broker for the whole test session, started as `make run` starts its own
    (``openfable.embedded_broker``); its URL. The app of this process sends its tasks there, and a
    test that starts a worker or a web server hands it the URL (``OPENFABLE_BROKER_URL``): the
    default, a server in the data folder, exists only where `make run` starts one.

    In a short folder of its own (a Unix socket's path is short), so that test runs side by side
    each have theirs."""
    from openfable import embedded_broker
    from openfable.celery import app

    folder = Path(tempfile.mkdtemp(prefix="openfable-test-broker-"))
    previous = (app.conf.broker_url, app.conf.broker_transport_options)
    try:
        with embedded_broker.running(folder) as url:
            app.conf.broker_url, app.conf.broker_transport_options = url, {}
            app._after_fork()  # a producer pool made before points at the default broker
            yield url
    finally:
        app.conf.broker_url, app.conf.broker_transport_options = previous
        app._after_fork()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def broker_url(session_broker: str) -> str:
    """The session's broker, emptied first: a test that counts or consumes messages sees only its
    own (earlier tests leave theirs, for documents long rolled back)."""
    import redis

    redis.Redis.from_url(session_broker.replace("redis+socket://", "unix://")).flushdb()
    return session_broker


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The evaluation datasets live beside the repository (../shared), never inside it."""
    path = Path(os.environ.get("OPENFABLE_SHARED_DIR", REPO_ROOT.parent / "shared"))
    if not (path / "datasets").is_dir():
        pytest.fail(f"datasets not found under {path}; set OPENFABLE_SHARED_DIR")
    return path


@pytest.fixture
def eager_tasks() -> Iterator[None]:
    """Tasks queued by the services run inline when their transaction commits (pair it with
    pytest-django's ``django_capture_on_commit_callbacks(execute=True)``)."""
    from openfable.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = previous


@pytest.fixture
def file_storage(settings: object, tmp_path: Path) -> Path:
    """Uploaded originals and page images go to a folder of the test's own, not DATA_DIR/files."""
    folder = tmp_path / "files"
    settings.STORAGES = {  # type: ignore[attr-defined]
        **settings.STORAGES,  # type: ignore[attr-defined]
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(folder)},
        },
    }
    settings.PAGE_IMAGES_DIR = tmp_path / "page-images"  # type: ignore[attr-defined]
    return folder
