"""The OpenAPI schema is valid, and the API keeps to it: schemathesis (the command, as a person
would run it) generates requests from the schema against a live server, with every check it has
(``--checks all``: no 5xx, status codes, content types, headers and bodies as documented,
schema-invalid input refused, schema-valid input accepted, methods, auth, and the stateful
checks), as a plain user and as a superuser, and must find nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from api.serializers import SLUG_PATTERN
from documents.models import Document, Node
from documents.services.collections import collection_update, slug_check
from documents.services.document_input import DocumentInputError
from documents.services.documents import document_create
from documents.services.jobs import job_run_now
from openfable.api_tokens import token_create
from tests.api.conftest import GUIDE
from tests.factories import CollectionFactory, UserFactory

HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
# DELETE /tokens/{id} revokes the token the run signs in with (its id comes back from GET
# /tokens, and schemathesis reuses ids it has seen), after which every request would only test the
# 401. So it runs on its own, last, with the same checks.
REVOKE = "v1_api_tokens_destroy"


def test_the_schema_validates(tmp_path: Any) -> None:
    # drf-spectacular's own validation, failing on any warning (as `spectacular --validate` in CI).
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    assert "/v1/api/query" in (tmp_path / "schema.yml").read_text()


@hypothesis_settings(derandomize=True, max_examples=300)  # the same slugs every run: it cannot flake in CI
@given(st.from_regex(r"[a-z0-9_\-]{0,12}|[ -~]{0,12}|default(-[0-9]{1,3}){0,2}|[0-9]{1,4}", fullmatch=True))
def test_the_schema_slug_pattern_is_the_service_rule(slug: str) -> None:
    try:
        slug_check(slug)
        accepted = bool(slug)
    except DocumentInputError:
        accepted = False
    assert (re.search(SLUG_PATTERN, slug) is not None) == accepted, slug


@pytest.mark.slow
@pytest.mark.starts_first
@pytest.mark.parametrize("superuser", [False, True], ids=["plain user", "superuser"])
def test_schemathesis_finds_nothing_with_every_check(
    live_server: Any, transactional_db: None, settings: Any, tmp_path: Path, superuser: bool
) -> None:
    user = UserFactory.create(is_superuser=superuser, is_staff=superuser)
    collection = CollectionFactory.create(owner=user)
    document = document_create(collection=collection, content=GUIDE, queue=False).document
    indexed = job_run_now(document_id=document.pk)
    assert indexed is not None and indexed.succeeded
    _, key = token_create(user=user, name="schemathesis")
    _real_ids(tmp_path, document=document, invited=user)
    # No worker runs here: ?wait=true must not hold each generated upload for two minutes. And the
    # run is one user's burst of requests, not what the rate limit is for.
    settings.API_WAIT_SECONDS = 0.01
    settings.API_THROTTLE_RATES = {user.get_username(): "1000000/minute"}
    operations = len(_schema_operations(live_server.url, key))
    # The superuser sees the same operations with wider permissions. Its run leaves out the
    # coverage phase (two thirds of a run's time): those cases are derived from the schema alone
    # (each field's boundary and invalid values), the same for every user, and the plain user's
    # run sends them all; the superuser's fuzzing and stateful phases, with every check, reach
    # what only its permissions open. Fewer examples each keep the suite's longest test in bounds.
    # The plain user's stateful phase is tests/api/test_schema_stateful.py's, which drives it
    # through every tree edit with real ids and says what each operation answered.
    run = (
        ["--max-examples=10", "--phases=fuzzing,stateful"]
        if superuser
        else ["--max-examples=25", "--phases=examples,coverage,fuzzing"]
    )
    everything_else = _schemathesis(live_server.url, key, tmp_path, *run, f"--exclude-operation-id={REVOKE}")
    assert _tested(everything_else) == operations - 1, everything_else[-3_000:]
    # Alone, the revoke has no links to follow (they lead to and from operations left out): no
    # stateful phase, which would report the links it cannot reach as an error.
    alone = (
        ["--max-examples=10", "--phases=fuzzing"]
        if superuser
        else ["--max-examples=25", "--phases=examples,coverage,fuzzing"]
    )
    revoke = _schemathesis(live_server.url, key, tmp_path, *alone, f"--include-operation-id={REVOKE}")
    assert _tested(revoke) == 1, revoke[-3_000:]


def _schemathesis(base_url: str, key: str, folder: Path, *selection: str) -> str:
    """``schemathesis run`` as a person would run it; its report, once it found nothing."""
    run = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{base_url}/v1/api/schema/?format=json",
            "--checks=all",
            "--generation-deterministic",  # the same requests every run: it cannot flake in CI
            "--workers=1",  # two workers race each other's deletes: a run then fails now and then
            "--no-color",
            f"--header=Authorization: Bearer {key}",
            *selection,
        ],
        cwd=folder,  # it keeps a .schemathesis folder where it runs
        env={"SCHEMATHESIS_HOOKS": str(HOOKS), "PATH": "/usr/bin:/bin", "HOME": str(folder)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-20_000:]
    return report


def _real_ids(folder: Path, *, document: Document, invited: Any) -> None:
    """A schemathesis.toml where the run starts (``folder``) that sends real ids to the operations
    on nodes, on a document's edits and on an invitation, whose ids no link in the schema hands
    over: generated ids only ever reached their 404. Each operation that may take its node away
    (dissolve, merge, split, move) gets a node of its own, so that every check also runs against
    real nodes; once one succeeds, the later requests for it meet a changed tree or a 404."""
    sections = list(Node.objects.filter(document=document, kind=Node.Kind.SECTION).order_by("order"))
    leaves = list(Node.objects.filter(document=document, kind=Node.Kind.LEAF).order_by("order"))
    assert len(sections) >= 2 and len(leaves) >= 3, "the guide has sections and leaves to spare"
    other = CollectionFactory.create(owner=UserFactory.create())
    collection_update(collection=other, members=[invited], by=other.owner)
    invitation = other.invitations.get(user=invited)
    real = {
        "v1_api_nodes_retrieve": sections[0].pk,
        "v1_api_nodes_partial_update": sections[0].pk,
        "v1_api_nodes_move_places_retrieve": sections[0].pk,
        "v1_api_nodes_dissolve_create": sections[-1].pk,
        "v1_api_nodes_merge_create": leaves[0].pk,
        "v1_api_nodes_move_create": leaves[1].pk,
        "v1_api_nodes_split_create": leaves[-1].pk,
        "v1_api_documents_group_create": document.pk,
        "v1_api_documents_undo_create": document.pk,
        "v1_api_invitations_create": invitation.pk,
        "v1_api_invitations_destroy": invitation.pk,
    }
    (folder / "schemathesis.toml").write_text(
        "".join(
            f'[[operations]]\ninclude-operation-id = "{operation}"\nparameters = {{ "path.id" = {pk} }}\n\n'
            for operation, pk in real.items()
        )
    )


def _tested(report: str) -> int:
    found = re.search(r"Tested: +(\d+)", report)
    return int(found.group(1)) if found else 0


def _schema_operations(base_url: str, key: str) -> list[tuple[str, str]]:
    # The schema needs a sign-in; schemathesis loads it with the same --header.
    signed = {"Authorization": f"Bearer {key}"}
    paths = httpx.get(f"{base_url}/v1/api/schema/", params={"format": "json"}, headers=signed).json()["paths"]
    return [(method, path) for path, operations in paths.items() for method in operations]
