"""The sentences start-up ends with when the disk or the embedded server fails it (the real file
systems are in tests/faults/test_data_dir_unusable.py)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from openfable.embedded_db import _start_failure
from openfable.startup import StartupError, disk_problem, exit_on_startup_error, write_private_file


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.EROFS, "is on a read-only file system"),
        (errno.ENOSPC, "is full ("),
        (errno.EACCES, "is not writable by the user"),
        (errno.EIO, "cannot be written (Input/output error)"),
    ],
)
def test_each_disk_error_is_named_with_its_folder(code: int, words: str, tmp_path: Path) -> None:
    message = str(disk_problem(OSError(code, {errno.EIO: "Input/output error"}.get(code, "x")), tmp_path))
    assert words in message and str(tmp_path) in message and "OPENFABLE_DATA_DIR" in message


def test_a_server_that_will_not_start_is_named_from_its_log(tmp_path: Path) -> None:
    (tmp_path / "log").write_text(
        "LOG:  starting PostgreSQL 16.2\nFATAL:  could not create shared memory segment: Invalid argument\n"
    )
    message = str(_start_failure(tmp_path, "Failed postgres command pg_ctl"))
    assert "did not start (could not create shared memory segment: Invalid argument)" in message
    assert f"see its log {tmp_path / 'log'}" in message and "OPENFABLE_DATABASE_URL" in message


def test_a_full_disk_reported_by_initdb_reads_as_a_full_disk(tmp_path: Path) -> None:
    said = "initdb: error: could not write file: No space left on device"
    assert "is full (" in str(_start_failure(tmp_path, said))


def test_the_process_ends_with_the_sentence_and_no_traceback() -> None:
    def step() -> None:
        raise StartupError("the data folder /x is on a read-only file system; do this.")

    with pytest.raises(SystemExit) as ended:
        exit_on_startup_error(step)
    assert (
        ended.value.code
        == "OpenFable cannot start: the data folder /x is on a read-only file system; do this."
    )
    assert ended.value.__cause__ is None and ended.value.__suppress_context__


def test_a_key_that_could_not_be_written_leaves_no_half_file(tmp_path: Path) -> None:
    folder = tmp_path / "taken"
    folder.write_text("a file where the folder should be")
    with pytest.raises(StartupError, match="cannot be written"):
        write_private_file(folder / "secret_key", "k")
    assert not (folder / "secret_key").exists()
