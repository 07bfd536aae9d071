"""The production shape, run for real: the commands docker-compose.yml runs, with its environment
and the Dockerfile's, as processes on this machine, spoken to over HTTP only.

Compose itself (`docker-compose config`) reads the file and fills in its variables, so the test
runs what the file says, in the order it says (migrate to the end, then the web app and the worker
together), and cannot drift from it; only the addresses change: the `db` service is a
fresh database on the test PostgreSQL server (migrate makes the pgvector extension, as on the
pgvector image), `redis` is Debian's redis-server started here, and the web server binds a free
local port. Two web workers (OPENFABLE_WEB_WORKERS=2), debug off, plain HTTP (OPENFABLE_HTTPS=false).

Over HTTP: the health check sees every part; an operator's account (createsuperuser, as one would
`docker compose exec web`) signs in through the sign-in form, makes an API token; a document is
uploaded through REST, indexed by the Celery worker through Redis, and a query returns evidence
from it; the home page and its static files are served; repeated bad sign-ins are locked out
across both workers; a missing page gives nothing away.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml
from django.conf import settings

from tests.conftest import REPO_ROOT
from tests.faults.processes import free_port, redis_server

pytestmark = [pytest.mark.faults, pytest.mark.slow]

DOCUMENT = """# Skerryvane lighthouse

## Keepers

The lamp of the Skerryvane lighthouse is cleaned every Tuesday by the keeper Morag Baird, who
climbs the one hundred and forty steps before dawn.

## Supplies

Paraffin, bread and letters reach the rock by the tender Hesperus once a fortnight, weather allowing.
"""
# Another document in the same collection, so that "the evidence is from that document" means something.
DISTRACTOR = """# Corner bakery

## Opening hours

The corner bakery on Quay Street opens at six and sells rye loaves until they run out.
"""
QUESTION = "Who cleans the lamp of the lighthouse?"
OPERATOR_PASSWORD = "a long operator password"
# What compose is given from the outside: the secret it insists on, plain HTTP for this test's
# client, and two web workers (the file's default is one).
COMPOSE_VARIABLES = {
    "OPENFABLE_SECRET_KEY": secrets.token_urlsafe(50),
    "OPENFABLE_HTTPS": "false",
    "OPENFABLE_WEB_WORKERS": "2",
}


def _compose_services() -> dict[str, Any]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    result = subprocess.run(
        ["docker-compose", "config"],
        cwd=REPO_ROOT,
        env=environment | COMPOSE_VARIABLES,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    services: dict[str, Any] = yaml.safe_load(result.stdout)["services"]
    return services


def _dockerfile_environment() -> dict[str, str]:
    """The image's ENV lines (continuations joined), as the container would have them."""
    text = (REPO_ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            found |= dict(word.split("=", 1) for word in shlex.split(line[4:]))
    return found


def _wait(condition: Callable[[], bool], timeout: float, what: str, logs: Sequence[Path] = ()) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.3)
    tails = "\n".join(
        f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in logs if log.exists()
    )
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{tails}")


@pytest.fixture
def private_database() -> Iterator[str]:
    """A fresh, empty database on the test PostgreSQL server, dropped afterwards."""
    server = settings.DATABASES["default"]
    name = f"prodshape_{secrets.token_hex(4)}"
    admin_url = f"postgresql://{server['USER']}@/postgres?host={server['HOST']}"
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://{server['USER']}@/{name}?host={server['HOST']}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path) as url:
        yield url


class _Processes:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def start(self, command: list[str], env: dict[str, str], log_name: str) -> subprocess.Popen[bytes]:
        log = self.folder / log_name
        self.logs.append(log)
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=env,
            start_new_session=True,  # its own process group: the stop takes its workers too
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.started.append(process)
        return process

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.started:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def _service_environment(
    service: dict[str, Any], *, database_url: str, broker_url: str, data_dir: Path
) -> dict[str, str]:
    environment: dict[str, str] = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OPENFABLE_", "DJANGO_ALLOW_ASYNC_UNSAFE"))
    }
    environment |= _dockerfile_environment()
    environment |= {key: str(value) for key, value in service["environment"].items()}
    # The only changes: where the `db` and `redis` services are, and where the image's /app/var is.
    assert "@db:5432/" in environment["OPENFABLE_DATABASE_URL"]
    assert environment["OPENFABLE_BROKER_URL"].startswith("redis://redis:6379")
    assert environment["OPENFABLE_DATA_DIR"] == "/app/var"
    environment |= {
        "OPENFABLE_DATABASE_URL": database_url,
        "OPENFABLE_BROKER_URL": broker_url,
        "OPENFABLE_DATA_DIR": str(data_dir),
        # The image's python, gunicorn and celery are this virtualenv's.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{environment.get('PATH', '')}",
    }
    return environment


def test_the_compose_services_serve_upload_index_and_query_over_http(
    tmp_path: Path, private_database: str, redis_url: str
) -> None:
    started_at = time.monotonic()
    services = _compose_services()
    port = free_port()
    data_dir = tmp_path / "var"
    places = {"database_url": private_database, "broker_url": redis_url, "data_dir": data_dir}
    migrate_environment, web_environment, worker_environment = (
        _service_environment(services[name], **places)  # type: ignore[arg-type]
        for name in ("migrate", "web", "worker")
    )
    migrate_command = shlex.split(services["migrate"]["command"])
    web_command = shlex.split(services["web"]["command"])
    assert web_command[0] == "gunicorn" and web_command[web_command.index("--workers") + 1] == "2"
    web_command[web_command.index("--bind") + 1] = f"127.0.0.1:{port}"
    worker_command = shlex.split(services["worker"]["command"])
    assert worker_command[:4] == ["celery", "-A", "openfable", "worker"]
    for name in ("web", "worker"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}

    processes = _Processes(tmp_path)
    try:
        # As compose orders them: the migrations to the end, then the web app and the worker together.
        migrated = subprocess.run(
            migrate_command,
            cwd=REPO_ROOT,
            env=migrate_environment,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert migrated.returncode == 0, migrated.stdout[-2000:] + migrated.stderr[-3000:]
        assert "Applying documents.0001_vector_extension... OK" in migrated.stdout
        processes.start(web_command, web_environment, "web.log")
        processes.start(worker_command, worker_environment, "worker.log")
        base = f"http://127.0.0.1:{port}"
        web = httpx.Client(base_url=base, timeout=30)

        def healthy() -> bool:
            try:
                return web.get("/v1/api/health").status_code == 200
            except httpx.TransportError:
                return False

        _wait(healthy, timeout=75, what="/v1/api/health to answer 200", logs=processes.logs)
        checks = web.get("/v1/api/health").json()["checks"]
        assert {"database", "pgvector", "broker", "worker", "embeddings"} <= set(checks)
        assert all(check["ok"] for check in checks.values()), checks
        ready_after = time.monotonic() - started_at

        operator = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "createsuperuser",
                "--noinput",
                "--username",
                "ops",
                "--email",
                "ops@example.test",
            ],
            cwd=REPO_ROOT,
            env=web_environment | {"DJANGO_SUPERUSER_PASSWORD": OPERATOR_PASSWORD},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert operator.returncode == 0, operator.stderr

        # The operator signs in through the sign-in form (CSRF token and all) and makes a token.
        browser = httpx.Client(base_url=base, timeout=30)
        assert browser.get("/").status_code == 302, "the home page asks for a sign-in"
        form = browser.get("/accounts/login/")
        assert form.status_code == 200
        csrf = browser.cookies["csrftoken"]
        signed_in = browser.post(
            "/accounts/login/",
            data={"username": "ops", "password": OPERATOR_PASSWORD, "csrfmiddlewaretoken": csrf, "next": "/"},
        )
        assert signed_in.status_code == 302 and signed_in.headers["location"] == "/", signed_in.text[:500]
        home = browser.get("/")
        assert home.status_code == 200 and "Corpus" in home.text
        stylesheets = re.findall(r'href="(/static/[^"]+\.css)"', home.text)
        scripts = re.findall(r'src="(/static/[^"]+\.js)"', home.text)
        assert stylesheets and scripts
        for asset in stylesheets + scripts:
            served = browser.get(asset)
            assert served.status_code == 200 and len(served.content) > 100, asset
            assert served.headers["content-type"].split(";")[0] in {"text/css", "text/javascript"}, asset
        made = browser.post(
            "/v1/api/tokens",
            json={"name": "production shape"},
            headers={"X-CSRFToken": browser.cookies["csrftoken"]},
        )
        assert made.status_code == 201, made.text
        api = httpx.Client(
            base_url=f"{base}/v1/api", headers={"Authorization": f"Bearer {made.json()['key']}"}, timeout=30
        )

        # Upload, index through the worker and Redis, query.
        added = api.post("/documents", json={"text": DOCUMENT, "title": "Skerryvane", "tags": ["sea"]})
        assert added.status_code == 202, added.text
        document_id = added.json()["document"]["id"]
        other = api.post("/documents", json={"text": DISTRACTOR, "title": "Bakery"})
        assert other.status_code == 202, other.text

        def indexed() -> bool:
            statuses = [
                api.get(f"/documents/{pk}", params={"meta_only": "true"}).json()["status"]
                for pk in (document_id, other.json()["document"]["id"])
            ]
            assert "failed" not in statuses, api.get("/documents").text
            return statuses == ["indexed", "indexed"]

        _wait(indexed, timeout=60, what="the worker to index the documents", logs=processes.logs)
        answer = api.post("/query", json={"query": QUESTION, "token_budget": 300})
        assert answer.status_code == 200, answer.text
        chunks = answer.json()["chunks"]
        assert chunks and chunks[0]["document_id"] == document_id, chunks  # the best document comes first
        assert [chunk["document_id"] for chunk in chunks if "Morag Baird" in chunk["content"]] == [
            document_id
        ]

        # Bad sign-ins are counted in the database, whichever of the two workers answers each.
        limit = 5  # the default OPENFABLE_LOGIN_FAILURE_LIMIT; compose does not change it
        guesser = httpx.Client(base_url=base, timeout=30)
        guesser.get("/accounts/login/")
        statuses = [
            guesser.post(
                "/accounts/login/",
                data={
                    "username": "ops",
                    "password": f"guess {n}",
                    "csrfmiddlewaretoken": guesser.cookies["csrftoken"],
                },
            ).status_code
            for n in range(limit + 1)
        ]
        assert statuses == [200] * (limit - 1) + [429, 429], statuses

        missing = browser.get("/no-such-page/")
        assert missing.status_code == 404
        assert not [
            leak for leak in ("Traceback", "URLconf", "urlpatterns", "SECRET_KEY") if leak in missing.text
        ]

        web_log = (tmp_path / "web.log").read_text(errors="replace")
        assert len(re.findall(r"Booting worker with pid", web_log)) >= 2, web_log[-3000:]
        assert "uvicorn_worker.UvicornWorker" in web_log
        for log in processes.logs:
            assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")[-5000:]
        print(
            f"production shape: healthy after {ready_after:.1f} s, done after {time.monotonic() - started_at:.1f} s"
        )
    finally:
        processes.stop_all()


def test_the_image_leaves_the_hosts_local_state_out() -> None:
    """`COPY . .` must not carry the host's virtualenv, history, embedded database or secret key."""
    ignored = set((REPO_ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", "var"} <= ignored
    assert "COPY . ." in (REPO_ROOT / "Dockerfile").read_text()
