"""docs/integrations.md keeps its word: its blocks run in page order, as a reader would run them
(the shell lines in bash, each Python block as a script), against a live server, and each prints
what the page says it does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integrations.conftest import Person

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGE = REPO_ROOT / "docs" / "integrations.md"
_BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.M | re.S)
# Set by the test instead (the server's address and token), or installed already (the dev extras).
_SKIPPED = ("export ", "pip install ")


def blocks() -> list[tuple[str, str]]:
    return [(kind, body) for kind, body in _BLOCK.findall(PAGE.read_text(encoding="utf-8"))]


def test_the_page_shows_each_way_in() -> None:
    python = "\n".join(body for kind, body in blocks() if kind == "python")
    for needed in (
        "httpx.Client",
        "openfable_api",
        "openfable_client.langchain",
        "openfable_client.llamaindex",
    ):
        assert needed in python


def test_every_snippet_runs_against_a_live_server(
    live_url: str, person: Person, eager_tasks: None, tmp_path: Path
) -> None:
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO_ROOT),  # openfable_client, as `pip install -e ".[langchain]"` would give it
        "OPENFABLE_URL": live_url,
        "OPENFABLE_TOKEN": person.key,
        **{name: os.environ[name] for name in ("LANG", "TMPDIR") if name in os.environ},
    }
    printed = []
    for number, (kind, body) in enumerate(blocks()):
        if kind == "sh":
            script = "\n".join(line for line in body.splitlines() if not line.startswith(_SKIPPED))
            command = ["bash", "-euo", "pipefail", "-c", script]
        else:
            (tmp_path / f"snippet_{number}.py").write_text(body, encoding="utf-8")
            command = [sys.executable, f"snippet_{number}.py"]
        run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, f"block {number} ({kind}):\n{body}\n{run.stdout}\n{run.stderr}"
        printed.append(run.stdout)
    rest, generated, langchain, llamaindex = (
        out for out, (kind, _) in zip(printed, blocks(), strict=True) if kind == "python"
    )
    assert "Tides ['sea'] Tides › Spring tides" in rest
    assert "paths run:" in generated and "bytes as uploaded" in generated and "  Spring tides" in generated
    assert "/v1/api/documents/" in langchain and "passages, asynchronously" in langchain
    assert "refused: 404 not_found" in llamaindex and "Tides" in llamaindex
