"""What start-up needs from the disk, said in one sentence when the disk cannot give it.

The data folder (OPENFABLE_DATA_DIR) holds the local secret key, the collected static files, the
embedded broker and the embedded PostgreSQL cluster. A read-only, full or foreign folder used to
end start-up with a traceback from wherever it was touched first. Here each such failure becomes a
``StartupError`` naming what is wrong and where, and the settings end the process with it
(``exit_on_startup_error``): the message on stderr, exit status 1, for ``manage.py``, ``make
run``, the worker and the web server alike.
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import os
import shutil
from collections.abc import Callable
from pathlib import Path

_REMEDY = "point OPENFABLE_DATA_DIR at a writable folder with free space"


class StartupError(Exception):
    """A problem with the machine a person must fix before the app can start; the message says
    what is wrong, where, and what to do."""


def exit_on_startup_error[T](step: Callable[[], T]) -> T:
    """Run a start-up step; a ``StartupError`` ends the process with its sentence (no traceback)."""
    try:
        return step()
    except StartupError as error:
        raise SystemExit(f"OpenFable cannot start: {error}") from None


def disk_problem(error: OSError, path: Path, *, what: str = "the data folder") -> StartupError:
    """The sentence for an ``OSError`` met while writing under ``path``."""
    code = error.errno
    if code == errno.EROFS:
        problem = f"{what} {path} is on a read-only file system"
    elif code in (errno.ENOSPC, errno.EDQUOT):
        problem = f"the disk holding {what} {path} is full ({free_space(path)} free)"
    elif code in (errno.EACCES, errno.EPERM):
        problem = f"{what} {path} is not writable by the user {_user()} (permission denied)"
    else:
        problem = f"{what} {path} cannot be written ({error.strerror or error})"
    return StartupError(f"{problem}; {_REMEDY}.")


def ensure_folder(path: Path, *, what: str = "the data folder") -> Path:
    """``path`` as a folder this process can write in (made if missing), or a ``StartupError``.

    Writes and removes a probe file: an existing folder on a read-only or full disk passes
    ``mkdir`` and fails only at the first real write, somewhere less helpful."""
    probe = path / f".write-probe-{os.getpid()}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"openfable")
        probe.unlink()
    except OSError as error:
        raise disk_problem(error, path, what=what) from error
    return path


def make_folder(path: Path, *, what: str) -> Path:
    """``mkdir -p``, or a ``StartupError``; nothing is written (a deployment may keep a folder read-only)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise disk_problem(error, path, what=what) from error
    return path


def write_private_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (its folder made if missing), readable by this user only, or a
    ``StartupError``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o600)
    except OSError as error:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)  # a half-written key would be read as the key next time
        raise disk_problem(error, path.parent) from error


def free_space(path: Path) -> str:
    """The free space of the disk holding ``path`` (or its nearest existing parent), for people."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        free = shutil.disk_usage(existing).free
    except OSError:
        return "unknown space"
    return f"{free / 1_000_000:.1f} MB" if free < 10_000_000_000 else f"{free / 1_000_000_000:.0f} GB"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (containers)
        return f"with uid {os.getuid()}"
