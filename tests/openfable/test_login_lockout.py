"""Repeated failed sign-ins are locked out (django-axes), on the app's sign-in page and the admin's,
with debug off and on: a 429 page in the app's look, the right password refused while locked, and
the sign-in working again after the cool-off or after a successful one clears the count."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import time_machine
from django.conf import global_settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
LOGIN_PAGES = ["/accounts/login/", "/admin/login/"]


@pytest.fixture
def person() -> User:
    return get_user_model().objects.create_user(username="ada", password=PASSWORD, is_staff=True)


@pytest.fixture(params=[False, True], ids=["debug-off", "debug-on"])
def debug(request: pytest.FixtureRequest, settings: Settings) -> bool:
    settings.DEBUG = request.param
    return bool(request.param)


def _sign_in(client: Client, page: str, password: str, username: str = "ada", **extra: str) -> int:
    return client.post(page, {"username": username, "password": password}, **extra).status_code  # type: ignore[arg-type]


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


@pytest.mark.parametrize("page", LOGIN_PAGES)
def test_the_limit_locks_the_pair_out_even_with_the_right_password(
    person: User, page: str, debug: bool, settings: Settings
) -> None:
    limit = settings.LOGIN_FAILURE_LIMIT
    client = Client()
    for _ in range(limit - 1):
        assert _sign_in(client, page, "wrong") == 200, "a wrong password before the limit is the form again"
    locked = client.post(page, {"username": "ada", "password": "wrong"})
    assert locked.status_code == 429
    body = locked.content.decode()
    assert "Too many attempts" in body and "Too many failed sign-ins" in body and "15 minutes" in body
    assert 'href="/static/openfable/app.css"' in body, "the page is in the app's look"
    assert "Traceback" not in body and locked["Retry-After"] == "900"

    refused = client.post(page, {"username": "ada", "password": PASSWORD})
    assert refused.status_code == 429 and not _signed_in(client), "the right password while locked"


def test_a_lockout_answers_json_to_a_json_caller(person: User, settings: Settings) -> None:
    client = Client()
    for _ in range(settings.LOGIN_FAILURE_LIMIT):
        response = client.post(
            "/accounts/login/", {"username": "ada", "password": "x"}, HTTP_ACCEPT="application/json"
        )
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "too_many_attempts"
    assert response.json()["error"]["details"] == {"retry_after_seconds": 900}


def test_the_sign_in_works_again_after_the_cool_off(person: User, settings: Settings, debug: bool) -> None:
    # The clock is moved, not slept through: a 1 s cool-off around several password hashes expired
    # before the "still locked" check on a busy machine. Frozen, the real 15 minutes are tested.
    cool_off = settings.AXES_COOLOFF_TIME
    client = Client()
    with time_machine.travel(datetime(2026, 3, 2, 9, 0, tzinfo=UTC), tick=False) as clock:
        for _ in range(settings.LOGIN_FAILURE_LIMIT):
            _sign_in(client, "/accounts/login/", "wrong")
        assert _sign_in(client, "/accounts/login/", PASSWORD) == 429
        clock.shift(cool_off - timedelta(seconds=1))
        assert _sign_in(client, "/accounts/login/", PASSWORD) == 429, "a second before the end: locked"
        assert not _signed_in(client)
        clock.shift(cool_off + timedelta(seconds=1))  # a full cool-off after the last try
        assert _sign_in(client, "/accounts/login/", PASSWORD) == 302 and _signed_in(client)


def test_an_administrator_can_unlock_through_the_library(person: User, settings: Settings) -> None:
    from axes.utils import reset

    client = Client()
    for _ in range(settings.LOGIN_FAILURE_LIMIT):
        _sign_in(client, "/admin/login/", "wrong")
    assert _sign_in(client, "/admin/login/", PASSWORD) == 429
    assert reset(username="ada") == 1
    assert _sign_in(client, "/admin/login/", PASSWORD) == 302 and _signed_in(client)


def test_a_successful_sign_in_clears_the_count(person: User, settings: Settings) -> None:
    limit = settings.LOGIN_FAILURE_LIMIT
    client = Client()
    for _ in range(limit - 1):
        _sign_in(client, "/accounts/login/", "wrong")
    assert _sign_in(client, "/accounts/login/", PASSWORD) == 302
    client.post(reverse("logout"))
    for _ in range(limit - 1):
        assert _sign_in(client, "/accounts/login/", "wrong") == 200, "counted from zero again"
    assert _sign_in(client, "/accounts/login/", PASSWORD) == 302 and _signed_in(client)


def test_the_lockout_is_per_username_and_address(person: User, settings: Settings) -> None:
    """Someone guessing Ada's password from one address neither locks Ada out elsewhere nor locks
    another person out at the same address."""
    get_user_model().objects.create_user(username="grace", password=PASSWORD)
    attacker = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(settings.LOGIN_FAILURE_LIMIT):
        _sign_in(attacker, "/accounts/login/", "wrong")
    assert _sign_in(attacker, "/accounts/login/", PASSWORD) == 429
    assert _sign_in(Client(REMOTE_ADDR="198.51.100.7"), "/accounts/login/", PASSWORD) == 302
    assert _sign_in(Client(REMOTE_ADDR="203.0.113.9"), "/accounts/login/", PASSWORD, username="grace") == 302


@pytest.mark.slow
def test_the_limit_and_cool_off_are_settings() -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    env |= {"OPENFABLE_LOGIN_FAILURE_LIMIT": "3", "OPENFABLE_LOGIN_COOLOFF_SECONDS": "120"}
    shown = "from django.conf import settings as s; print(s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME.total_seconds())"
    command = [sys.executable, "manage.py", "shell", "--no-imports", "-c", shown]
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3", "120.0"]
    env["OPENFABLE_LOGIN_FAILURE_LIMIT"] = "0"
    check = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode != 0 and "OPENFABLE_LOGIN_FAILURE_LIMIT=0 is out of range" in check.stderr


def test_failures_from_many_addresses_lock_the_username_everywhere(person: User, settings: Settings) -> None:
    """A guesser who changes address on every try never reaches the pair's limit; the username's
    own limit across all addresses stops them, and then the right password is refused everywhere
    until the cool-off (an administrator can unlock it)."""
    settings.LOGIN_USERNAME_FAILURE_LIMIT = 8
    for number in range(settings.LOGIN_USERNAME_FAILURE_LIMIT - 1):
        assert _sign_in(Client(REMOTE_ADDR=f"203.0.113.{number + 1}"), "/accounts/login/", "wrong") == 200
    grace = get_user_model().objects.create_user(username="grace", password=PASSWORD)
    assert _sign_in(Client(REMOTE_ADDR="198.51.100.7"), "/accounts/login/", PASSWORD, username="grace") == 302
    last = Client(REMOTE_ADDR="203.0.113.99")
    assert _sign_in(last, "/accounts/login/", "wrong") == 429, "the username's limit is reached"
    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    assert _sign_in(elsewhere, "/accounts/login/", PASSWORD) == 429 and not _signed_in(elsewhere)
    assert _sign_in(Client(REMOTE_ADDR="198.51.100.7"), "/admin/login/", PASSWORD) == 429
    assert (
        grace.is_active
        and _sign_in(Client(REMOTE_ADDR="203.0.113.99"), "/accounts/login/", PASSWORD, username="grace")
        == 302
    ), "other usernames are not touched"

    from axes.utils import reset

    reset(username="ada")
    assert _sign_in(Client(REMOTE_ADDR="198.51.100.7"), "/accounts/login/", PASSWORD) == 302


def test_x_forwarded_for_is_ignored_unless_behind_a_proxy(person: User, settings: Settings) -> None:
    """With OPENFABLE_BEHIND_PROXY off the address counted is the connection's, whatever header
    the client sends."""
    client = Client(REMOTE_ADDR="203.0.113.9")
    for number in range(settings.LOGIN_FAILURE_LIMIT - 1):
        assert _sign_in(client, "/accounts/login/", "wrong", HTTP_X_FORWARDED_FOR=f"10.0.0.{number}") == 200
    assert _sign_in(client, "/accounts/login/", "wrong", HTTP_X_FORWARDED_FOR="10.9.9.9") == 429
    assert _sign_in(client, "/accounts/login/", PASSWORD, HTTP_X_FORWARDED_FOR="10.8.8.8") == 429


def test_make_run_starts_uvicorn_without_proxy_headers_unless_behind_a_proxy(settings: Settings) -> None:
    from openfable.runner import _web_server_command

    settings.BEHIND_PROXY = False
    assert "--no-proxy-headers" in _web_server_command("python", host="127.0.0.1", port="8000")
    settings.BEHIND_PROXY = True
    assert "--no-proxy-headers" not in _web_server_command("python", host="127.0.0.1", port="8000")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_new_x_forwarded_for_on_each_try_does_not_escape_the_lockout_over_http(
    tmp_path: Path, settings: Settings
) -> None:
    """The web server exactly as `make run` starts it (uvicorn, its own process), reached over
    HTTP from 127.0.0.1, the address uvicorn trusts proxy headers from by default: a client
    sending a new X-Forwarded-For on each wrong password is still one address, and is locked out."""
    import httpx
    from django.db import connection

    from openfable.runner import _web_server_command
    from tests.faults.processes import app_environment, free_port, stop_process, wait_for

    assert not settings.BEHIND_PROXY
    # Hashed as the server process (the real settings) checks it: the right password would sign in.
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    get_user_model().objects.create_user(username="ada", password=PASSWORD)
    db = connection.settings_dict
    env = app_environment(
        database_url=f"postgresql://{db['USER']}@/{db['NAME']}?host={db['HOST']}",
        data_dir=str(tmp_path / "var"),
        secret_key="test-" + "k" * 50,
        https="false",
    )
    port = free_port()
    log = (tmp_path / "web.log").open("wb")
    server = subprocess.Popen(
        _web_server_command(sys.executable, host="127.0.0.1", port=str(port)),
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"

        def serving() -> bool:
            try:
                return httpx.get(f"{base}/accounts/login/", timeout=2).status_code == 200
            except httpx.HTTPError:
                assert server.poll() is None, (tmp_path / "web.log").read_text()
                return False

        wait_for(serving, timeout=90, what="the web server to answer")
        browser = httpx.Client(base_url=base, timeout=30)
        browser.get("/accounts/login/")

        def sign_in(password: str, forwarded_for: str) -> int:
            form = {
                "username": "ada",
                "password": password,
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
            }
            return browser.post(
                "/accounts/login/", data=form, headers={"X-Forwarded-For": forwarded_for}
            ).status_code

        statuses = [sign_in("wrong", f"10.0.{n}.{n}") for n in range(settings.LOGIN_FAILURE_LIMIT)]
        assert statuses == [200] * (settings.LOGIN_FAILURE_LIMIT - 1) + [429], statuses
        assert sign_in(PASSWORD, "10.99.99.99") == 429, "the right password while locked out"
    finally:
        stop_process(server)
        log.close()
