"""`OPENFABLE_LLM=local make run`: the local model is assembled into the data folder and its server
runs under the supervisor, answers the OpenAI protocol, is started again when it dies and is stopped
by Ctrl-C with the rest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path

import psutil

from openfable import local_llm
from tests.conftest import REPO_ROOT
from tests.openfable.test_make_run import _free_port, _Output


def _pid(line: str) -> int:
    return int(line.split("pid ")[1].rstrip(").\n"))


def test_make_run_serves_the_local_model_restarts_it_and_stops_it(tmp_path: Path) -> None:
    port, model_port = _free_port(), _free_port()
    data_dir = tmp_path / "var"
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    env.update(
        {
            "OPENFABLE_DATA_DIR": str(data_dir),
            "OPENFABLE_PORT": str(port),
            "OPENFABLE_LLM": "local",
            "OPENFABLE_LOCAL_LLM_PORT": str(model_port),
            "PYTHONUNBUFFERED": "1",
        }
    )
    process = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=REPO_ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    printed = _Output(process)
    model_pid = 0
    try:
        lines = printed.wait_for("OpenFable is running at", timeout=300)
        assert local_llm.model_path(data_dir).stat().st_size > 200_000_000, "assembled once"
        model_pid = _pid(next(line for line in lines if "Started the local model server" in line))
        assert any(f"The local model answers at http://127.0.0.1:{model_port}/v1" in line for line in lines)
        with urllib.request.urlopen(f"http://127.0.0.1:{model_port}/v1/models", timeout=10) as response:
            assert local_llm.MODEL_ALIAS in json.dumps(json.load(response))

        os.kill(model_pid, signal.SIGKILL)
        again = printed.wait_for("Started the local model server", timeout=30)
        assert any(
            "The local model server exited with status -9; starting it again." in line for line in again
        )
        model_pid = _pid(again[-1])
        assert local_llm.wait_until_ready(f"http://127.0.0.1:{model_port}/v1", timeout_s=120)
    finally:
        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        process.wait(timeout=90)
    output = printed.rest()
    assert "OpenFable stopped." in output
    assert "the local model" in output  # Ctrl-C named it among what it stops
    assert not psutil.pid_exists(model_pid) or psutil.Process(model_pid).status() == psutil.STATUS_ZOMBIE
