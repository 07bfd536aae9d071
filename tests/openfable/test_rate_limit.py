"""The per-user request count (openfable.rate_limit) is one for every web worker when the broker is
Redis, as in the compose file: two processes, like two gunicorn workers, share it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.faults.processes import app_environment, redis_server

pytestmark = pytest.mark.slow

COUNT = """
import django
django.setup()
from types import SimpleNamespace
from openfable.errors import TooManyAttemptsError
from openfable.rate_limit import rate_limit_check
user = SimpleNamespace(pk=987654321, is_authenticated=True, get_username=lambda: "worker-test")
answers = []
for _ in range({calls}):
    try:
        rate_limit_check(user=user)
        answers.append("ok")
    except TooManyAttemptsError as error:
        answers.append(error.code)
print(" ".join(answers))
"""


def _worker(calls: int, broker_url: str) -> list[str]:
    env = app_environment(broker_url=broker_url, api_throttle_rate="3/minute")
    env["DJANGO_SETTINGS_MODULE"] = "openfable.settings"
    done = subprocess.run(
        [sys.executable, "-c", COUNT.format(calls=calls)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_two_workers_share_one_count_through_redis(tmp_path: Path) -> None:
    with redis_server(tmp_path) as url:
        assert _worker(2, url) == ["ok", "ok"]
        assert _worker(2, url) == ["ok", "throttled"], "the second worker counted from zero"
