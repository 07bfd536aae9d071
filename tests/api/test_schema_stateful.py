"""schemathesis's stateful phase reaches every operation with real ids: it follows the schema's own
OpenAPI links (api.schema.LINKS) from a list or a create to a document, its tree, its nodes and
their edits, with every check, and each operation answers at least once with a 2xx.

test_schema.py's run sends every phase and sends the tree edits fixed real ids (schemathesis.toml),
which the stateful phase would also use in place of the ids it follows; here nothing is fixed: the
ids come from earlier answers, or the edits only meet their 404."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest

from documents.services.collections import collection_update
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from openfable.api_tokens import token_create
from tests.factories import CollectionFactory, UserFactory

HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")

# A title, an opening paragraph, sections: every edit the links lead to has a node it takes.
BOOK = "\n\n".join(
    [
        "# Volcanoes, copy {n}",
        "A guide to volcanoes. It covers how they form. It covers how they erupt.",
        "## Formation",
        "Magma rises through the crust. It collects in chambers. Pressure builds over years.",
        "Most volcanoes sit on plate boundaries. Some sit above hot spots. Iceland has both.",
        "## Eruptions",
        "Shield volcanoes erupt gently. Their lava flows far. Their slopes are shallow.",
        "Stratovolcanoes erupt explosively. They build steep cones. Ash can travel far.",
        "## Monitoring",
        "Seismometers record small quakes. Tilt meters measure swelling. Gas tells the rest.",
        "Warnings give people time to leave. Maps show the safe routes. Drills keep them known.",
    ]
)


# The run: more steps per scenario than the default 6 (a chain from the list to a second edit is
# four), and only the schema's links (inferred ones also lead a token list to revoking the run's own
# token, and a collection list to deleting the collection the documents are in). The document list
# it starts its chains from lists the indexed documents, all of them: filters drawn at random (a
# word no title holds, an offset past the end) list none, and a chain that starts there ends there;
# test_schema.py's run sends them every filter, valid and not (here positive only: a negative case
# whose bad value these fixed ones replace would be valid, and the API rightly answer 200).
CONFIG = """[phases.stateful]
max-steps = 40

[phases.stateful.inference]
algorithms = []

[[operations]]
include-operation-id = "v1_api_documents_list"
generation.mode = "positive"
parameters = { "query.status" = "indexed", "query.collection" = "", "query.offset" = 0, \
"query.tag" = "", "query.search" = "", "query.created_after" = "2000-01-01", \
"query.created_before" = "2999-01-01" }
"""
# Operations no link reaches, which the stateful phase leaves to test_schema.py's other phases: they
# take no id from an answer and lead nowhere with theirs. A token is made only in a signed-in
# browser session (403 with a token), so its revoke, whose only link follows a token made, is left
# out of the run (as in test_schema.py: from a list it would revoke the run's own token).
UNLINKED = {
    "GET /v1/api/health",
    "GET /v1/api/health/live",
    "GET /v1/api/tokens",
    "POST /v1/api/tokens",
    "DELETE /v1/api/tokens/{id}",
    "POST /v1/api/query",
}


@pytest.mark.starts_first
@pytest.mark.slow
def test_the_stateful_phase_reaches_every_operation_with_real_ids(
    live_server: Any, transactional_db: None, settings: Any, tmp_path: Path
) -> None:
    user = UserFactory.create()
    collection = CollectionFactory.create(owner=user)
    # Enough for the deletes and re-indexes that take one out of the indexed list each.
    for n in range(8):
        document = document_create(collection=collection, content=BOOK.format(n=n), queue=False).document
        indexed = job_run_now(document_id=document.pk)
        assert indexed is not None and indexed.succeeded
    inviter = UserFactory.create()  # invitations to accept and to decline
    for _ in range(4):
        collection_update(collection=CollectionFactory.create(owner=inviter), members=[user], by=inviter)
    _, key = token_create(user=user, name="schemathesis")
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    # No worker runs here: ?wait=true must not hold each generated upload for two minutes.
    settings.API_WAIT_SECONDS = 0.01
    settings.API_THROTTLE_RATES = {user.get_username(): "1000000/minute"}
    answers = tmp_path / "answers.jsonl"
    report = _schemathesis(live_server.url, key, tmp_path, answers)
    counts: dict[str, Counter[int]] = defaultdict(Counter)
    linked: Counter[str] = Counter()  # 2xx answers to a path id that came back in an earlier answer
    for line in answers.read_text().splitlines() if answers.exists() else []:
        answer = json.loads(line)
        assert answer["phase"] == "stateful", answer
        counts[answer["operation"]][answer["status"]] += 1
        linked[answer["operation"]] += bool(answer["seen_id"]) and 200 <= answer["status"] < 300
    print(_table(counts, linked))
    assert "No issues found" in report, report[-20_000:]
    operations = _operations(live_server.url, key)
    assert operations >= UNLINKED
    for operation in sorted(operations - UNLINKED):
        statuses = counts[operation]
        assert any(200 <= status < 300 for status in statuses), (operation, dict(statuses))
        if "{id}" in operation:
            assert linked[operation], f"{operation}: no 2xx for an id from an earlier answer"


def _table(counts: dict[str, Counter[int]], linked: Counter[str]) -> str:
    rows = [f"{'operation':<40} {'2xx, id from an answer':>22}  statuses"]
    for operation in sorted(counts):
        statuses = ", ".join(f"{status}×{n}" for status, n in sorted(counts[operation].items()))
        rows.append(f"{operation:<40} {linked[operation]:>22}  {statuses}")
    return "\n".join(rows)


def _operations(base_url: str, key: str) -> set[str]:
    signed = {"Authorization": f"Bearer {key}"}
    paths = httpx.get(f"{base_url}/v1/api/schema/", params={"format": "json"}, headers=signed).json()["paths"]
    return {f"{method.upper()} {path}" for path, operations in paths.items() for method in operations}


def _schemathesis(base_url: str, key: str, folder: Path, answers: Path) -> str:
    """The stateful phase alone, with every check; its report."""
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{base_url}/v1/api/schema/?format=json",
            "--phases=stateful",
            "--checks=all",
            "--max-examples=10",
            "--seed=1",  # --generation-deterministic runs only a handful of scenarios
            "--workers=1",
            "--no-color",
            f"--header=Authorization: Bearer {key}",
            "--exclude-operation-id=v1_api_tokens_destroy",
        ],
        cwd=folder,  # it reads schemathesis.toml there
        env={
            "SCHEMATHESIS_HOOKS": str(HOOKS),
            "OPENFABLE_SCHEMATHESIS_ANSWERS": str(answers),
            "PATH": "/usr/bin:/bin",
            "HOME": str(folder),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    return run.stdout + run.stderr
