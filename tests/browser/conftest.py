"""Browser tests: Playwright drives Debian's chromium (no browser download) against pytest-django's
live server, with a real Celery worker (in a thread, on the in-memory broker) indexing uploads."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker

from openfable.celery import app as celery_app

CHROMIUM = "/usr/bin/chromium"
REPO_ROOT = Path(__file__).resolve().parents[2]
# `make screenshots` sets it to docs/screenshots; otherwise the tests' screenshots go to a folder
# git ignores, so that a test run never rewrites the tracked ones.
SCREENSHOTS_ENV = "SCREENSHOTS_DIR"
WIDTHS = {"desktop": (1440, 900), "phone": (375, 812)}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _orm_beside_playwright() -> Iterator[None]:
    """Playwright's sync API keeps an event loop running on this thread; the ORM calls the tests
    make around it are still plain synchronous calls. Set from the first browser test on (they run
    last, see tests/conftest.py), so no process an earlier test starts inherits it (Django's deploy
    check rightly refuses it)."""
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (scripts/system-deps.sh)")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    }


@pytest.fixture
def celery_worker() -> Iterator[None]:
    """A real worker consuming the tasks the live server queues (in-memory broker, this process)."""
    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = "memory://"
    celery_app._after_fork()  # drop a pool made for another broker by an earlier test
    try:
        with start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
            yield
    finally:
        celery_app.conf.broker_url = previous
        celery_app._after_fork()


def screenshots_dir() -> Path:
    """Where screenshots go: ``$SCREENSHOTS_DIR`` (docs/screenshots under `make screenshots`), else
    var/test-screenshots, which git ignores."""
    given = os.environ.get(SCREENSHOTS_ENV)
    folder = Path(given).resolve() if given else REPO_ROOT / "var" / "test-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def screenshot(page: Any, name: str) -> None:
    """The page at desktop and phone widths, whole, as NAME-WIDTH.png in ``screenshots_dir()``."""
    folder = screenshots_dir()
    for label, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(folder / f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size({"width": 1440, "height": 900})
