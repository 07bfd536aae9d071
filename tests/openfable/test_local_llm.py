"""OPENFABLE_LLM=local: the settings it implies, the server command, and what a missing package says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openfable import local_llm
from openfable.startup import StartupError
from tests.conftest import REPO_ROOT

_PRINT = (
    "import json, django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'openfable.settings'); "
    "from django.conf import settings; print(json.dumps({k: getattr(settings, k) for k in "
    "('LOCAL_LLM', 'LLM_MODEL', 'LLM_BASE_URL', 'LLM_MAX_CONCURRENCY', 'LLM_TIMEOUT')}))"
)


def _settings(env: dict[str, str]) -> dict[str, object]:
    full = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")} | env
    done = subprocess.run(
        [sys.executable, "-c", _PRINT], cwd=REPO_ROOT, env=full, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_without_the_option_nothing_changes() -> None:
    assert _settings({}) == {
        "LOCAL_LLM": False,
        "LLM_MODEL": "",
        "LLM_BASE_URL": "",
        "LLM_MAX_CONCURRENCY": 4,
        "LLM_TIMEOUT": 60.0,
    }


def test_the_local_option_points_the_llm_settings_at_the_local_server() -> None:
    assert _settings({"OPENFABLE_LLM": "local", "OPENFABLE_LOCAL_LLM_PORT": "9123"}) == {
        "LOCAL_LLM": True,
        "LLM_MODEL": "gemma-3-270m",
        "LLM_BASE_URL": "http://127.0.0.1:9123/v1",
        "LLM_MAX_CONCURRENCY": 1,
        "LLM_TIMEOUT": 180.0,
    }


def test_a_setting_given_explicitly_still_wins() -> None:
    chosen = _settings({"OPENFABLE_LLM": "local", "OPENFABLE_LLM_MAX_CONCURRENCY": "2"})
    assert chosen["LLM_MAX_CONCURRENCY"] == 2
    assert chosen["LLM_MODEL"] == "gemma-3-270m"


def test_the_server_listens_on_the_loopback_with_the_model_and_its_name() -> None:
    command = local_llm.server_command("python", model=Path("/data/m.gguf"), port=8765, threads=2)
    assert command[:3] == ["python", "-m", "llama_cpp.server"]
    flags = dict(zip(command[3::2], command[4::2], strict=True))
    assert flags == {
        "--model": "/data/m.gguf",
        "--model_alias": "gemma-3-270m",
        "--host": "127.0.0.1",
        "--port": "8765",
        "--n_ctx": "8192",
        "--n_threads": "2",
        "--n_threads_batch": "2",
    }


def test_a_missing_package_stops_the_start_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(local_llm, "missing_packages", lambda: ["llama-cpp-python[server]"])
    with pytest.raises(StartupError, match=r"needs llama-cpp-python\[server\].*local-llm"):
        local_llm.ensure_model(tmp_path)
    assert not (tmp_path / "models").exists()
