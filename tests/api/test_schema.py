"""The OpenAPI schema is valid, and the API keeps to it: schemathesis generates requests from the
schema (a bounded number per operation) and checks every answer: no 5xx, and each response
matches what the schema says of it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from openfable.api_tokens import token_create
from tests.api.conftest import GUIDE
from tests.factories import CollectionFactory, UserFactory


def test_the_schema_validates(tmp_path: Any) -> None:
    # drf-spectacular's own validation, failing on any warning (as `spectacular --validate` in CI).
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    assert "/v1/api/query" in (tmp_path / "schema.yml").read_text()


@pytest.fixture
def api_schema(db: None) -> Iterator[Any]:
    # The WSGI app is called in-process inside the test's transaction: like Django's test client,
    # keep its request signals from closing that connection. And ?wait=true must not hold a
    # generated request for two minutes: no worker runs here.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        with override_settings(API_WAIT_SECONDS=0.2):
            yield schemathesis.openapi.from_wsgi("/v1/api/schema/?format=json", get_wsgi_application())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def bearer(db: None) -> dict[str, str]:
    from documents.services.documents import document_create

    user = UserFactory.create()
    collection = CollectionFactory.create(owner=user)
    document_create(collection=collection, content=GUIDE, queue=False)
    _, key = token_create(user=user, name="schemathesis")
    return {"Authorization": f"Bearer {key}"}


def test_the_api_keeps_to_its_schema(api_schema: Any, bearer: dict[str, str]) -> None:
    checked = []
    for result in api_schema.get_all_operations():
        operation = result.ok()
        if operation.path == "/v1/api/health":
            continue  # pings a worker (1 s each); tested on its own

        @given(case=operation.as_strategy())
        @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        def keeps_to_the_schema(case: Any) -> None:
            case.call_and_validate(
                headers=bearer,
                checks=[not_a_server_error, status_code_conformance, response_schema_conformance],
            )

        keeps_to_the_schema()
        checked.append(f"{operation.method.upper()} {operation.path}")
    assert len(checked) >= 15, checked
