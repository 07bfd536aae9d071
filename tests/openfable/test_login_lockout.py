"""Repeated failed sign-ins are locked out (django-axes), on the app's sign-in page and the admin's,
with debug off and on: a 429 page in the app's look, the right password refused while locked, and
the sign-in working again after the cool-off or after a successful one clears the count."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta

import pytest
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
    settings.AXES_COOLOFF_TIME = timedelta(seconds=1)
    settings.LOGIN_COOLOFF_SECONDS = 1
    client = Client()
    for _ in range(settings.LOGIN_FAILURE_LIMIT):
        _sign_in(client, "/accounts/login/", "wrong")
    assert _sign_in(client, "/accounts/login/", PASSWORD) == 429
    time.sleep(1.5)
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
