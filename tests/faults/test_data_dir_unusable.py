"""Start-up on a data folder the disk cannot serve: read-only, full, or not writable by this user.

The folder (OPENFABLE_DATA_DIR) holds the local secret key, the static files and the embedded
PostgreSQL cluster. Real file systems make the faults: a tmpfs mounted read-only, a tmpfs of 1 MB,
a tmpfs that held a working cluster and was then remounted read-only or filled to the last byte.
Run as root, a chmod would stop nothing, so the folder "not writable by this user" is a chmod 555
folder entered by root with every capability dropped (``setpriv``), or by the user itself when
the tests do not run as root. Each start (``manage.py check`` and ``python -m openfable.runner``,
which is ``make run``) must end with status 1 and one sentence on stderr saying what is wrong and
where, never a traceback.

Mounting needs root with CAP_SYS_ADMIN (a VM, or a privileged container). Where the machine
refuses it, the cases that need a file system of their own are skipped with the reason (shown in
the run's summary, never counted as passed): a CI runner without that capability must still be
able to run the rest of the suite. The "not writable" case needs no mount and always runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from openfable.embedded_db import stop
from tests.conftest import REPO_ROOT
from tests.faults.processes import app_environment, manage

pytestmark = [pytest.mark.faults, pytest.mark.slow]

STARTS = {
    "manage.py check": [sys.executable, "manage.py", "check"],
    "make run": [sys.executable, "-m", "openfable.runner"],
}


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(
            f"this case needs a real file system of its own, and `mount {' '.join(args)}` was refused "
            f"({done.stderr.strip()}): run the suite as root where mounting is allowed (a VM, or a "
            "container with CAP_SYS_ADMIN)"
        )


@pytest.fixture
def scratch() -> Iterator[Path]:
    """An empty folder outside pytest's temporary root (the database's own user must reach it);
    whatever a case mounts on it is unmounted afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="openfable-disk-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        stop(folder / "postgres")  # a case that started a cluster there
        subprocess.run(["umount", "--lazy", str(folder)], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def _used_once(folder: Path) -> None:
    """A data folder as a first run leaves it: secret key, static files, an initialised cluster
    (stopped again, as ``make run`` stops it on Ctrl-C)."""
    first = manage(app_environment(data_dir=str(folder)), "check", timeout=180)
    assert first.returncode == 0, first.stderr
    assert (folder / "postgres" / "PG_VERSION").exists()
    stop(folder / "postgres")


def _read_only_new(folder: Path) -> str:
    _mount("-t", "tmpfs", "-o", "size=4m,ro", "tmpfs", str(folder))
    return f"the data folder {folder} is on a read-only file system"


def _read_only_after_use(folder: Path) -> str:
    _mount("-t", "tmpfs", "-o", "size=100m,mode=755", "tmpfs", str(folder))
    _used_once(folder)
    _mount("-o", "remount,ro", str(folder))
    return f"the data folder {folder} is on a read-only file system"


def _full_new(folder: Path) -> str:
    _mount("-t", "tmpfs", "-o", "size=1m,mode=755", "tmpfs", str(folder))
    return f"the disk holding {folder / 'postgres'} has 1.0 MB free, and a new embedded database needs about 64 MB"


def _full_after_use(folder: Path) -> str:
    _mount("-t", "tmpfs", "-o", "size=100m,mode=755", "tmpfs", str(folder))
    _used_once(folder)
    with (folder / "filler").open("wb") as filler:  # to the last byte, as a runaway log would
        try:
            while True:
                filler.write(b"\0" * 1_048_576)
                filler.flush()
        except OSError:
            pass
    return f"the disk holding the data folder {folder} is full (0.0 MB free)"


def _not_writable(folder: Path) -> str:
    folder.chmod(0o555)
    return f"the data folder {folder} is not writable by the user"


CASES: dict[str, Callable[[Path], str]] = {
    "read-only, new": _read_only_new,
    "read-only after use": _read_only_after_use,
    "full, new": _full_new,
    "full after use": _full_after_use,
    "not writable by this user": _not_writable,
}


def _as_unprivileged(command: list[str]) -> list[str]:
    """Root keeps its uid (the interpreter lives under /root) but loses every capability, so file
    permissions bind it as they bind anyone; another user needs nothing."""
    if os.geteuid() != 0:
        return command
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv (util-linux) is missing: it drops root's capabilities for this case")
    return ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--", *command]


@pytest.mark.parametrize("case", CASES)
def test_a_start_on_an_unusable_data_folder_says_what_and_where_in_one_sentence(
    scratch: Path, case: str
) -> None:
    expected = CASES[case](scratch)
    for start, command in STARTS.items():
        if case == "not writable by this user":
            command = _as_unprivileged(command)
        done = subprocess.run(
            command,
            cwd=REPO_ROOT,
            env=app_environment(data_dir=str(scratch)) | {"PYTHONDONTWRITEBYTECODE": "1"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        said = done.stderr.strip()
        assert done.returncode == 1, f"{start}: exit {done.returncode}\n{said}"
        assert "Traceback" not in said and len(said.splitlines()) == 1, f"{start}:\n{said}"
        assert said.startswith("OpenFable cannot start: ") and expected in said, f"{start}: {said}"
        assert "OPENFABLE_DATA_DIR" in said, said
        print(f"{case}, {start}: {said}")
