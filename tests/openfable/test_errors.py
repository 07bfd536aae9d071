"""The error family: ``OpenFableError`` with two kinds beside each other, a mistake the caller can
fix (``UserInputError``, 4xx) and a service not answering (``ServiceUnavailableError``, 503); and
the one HTTP mapping (``openfable.http``) answering each kind with its status and code, on the
REST API and on the pages. The command line's mapping is tested in tests/cli/test_database_errors.py
(exit 1 with ``code`` for both kinds), the MCP tools' in tests/mcp_server/test_errors.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.cache import caches
from django.db import OperationalError
from django.test import Client
from django.urls import reverse
from pytest_django.fixtures import Settings as SettingsWrapper
from rest_framework.test import APIClient

from documents.services.nodes.summary import SummaryModelError
from openfable import errors
from openfable.api_tokens import token_create
from openfable.embeddings import EmbeddingDimensionError
from openfable.errors import OpenFableError, ServiceUnavailableError, UserInputError
from tests.factories import CollectionFactory, DocumentFactory, UserFactory
from tests.fakes.llm.server import ScriptedOpenAIServer, status
from tests.trees import sec, sec_text, sec_tree, tree_save

# Each error class with the status and code it answers with: unchanged by the split.
STATUSES = {
    errors.UserInputError: (400, "invalid_input"),
    errors.NotFoundError: (404, "not_found"),
    errors.ConflictError: (409, "conflict"),
    errors.PermissionDeniedError: (403, "forbidden"),
    errors.TooManyAttemptsError: (429, "too_many_attempts"),
    errors.PayloadTooLargeError: (413, "too_large"),
    errors.ServiceUnavailableError: (503, "unavailable"),
}


def test_a_service_not_answering_is_not_a_users_mistake() -> None:
    assert issubclass(UserInputError, OpenFableError) and issubclass(ServiceUnavailableError, OpenFableError)
    assert not issubclass(ServiceUnavailableError, UserInputError)
    assert not issubclass(SummaryModelError, UserInputError), "the model failing is an outage, a 503"
    assert issubclass(EmbeddingDimensionError, UserInputError), "a setting to fix"
    for kind, (code_status, code) in STATUSES.items():
        error = kind("What went wrong, and what to do.")
        assert (error.status, error.code) == (code_status, code), kind
        assert isinstance(error, UserInputError) == (code_status < 500), kind
        assert error.to_dict() == {
            "error": {"code": code, "message": "What went wrong, and what to do.", "details": {}}
        }


@pytest.fixture
def api_user(db: None, settings: SettingsWrapper) -> Iterator[tuple[APIClient, object]]:
    user = UserFactory.create()
    _, key = token_create(user=user, name="errors")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    caches["rate_limit"].clear()
    yield api, user
    caches["rate_limit"].clear()


def test_the_rest_api_answers_each_kind_with_its_status_and_code(
    api_user: tuple[APIClient, object], settings: SettingsWrapper, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, user = api_user
    missing = api.get("/v1/api/documents/987654")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")

    refused = api.post("/v1/api/tokens", {"name": "another"}, format="json")  # a token may not make one
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "session_required")

    def lost(**kwargs: object) -> None:
        raise OperationalError("terminating connection due to administrator command")

    with monkeypatch.context() as patched:
        patched.setattr("documents.selectors.document_list", lost)
        away = api.get("/v1/api/documents")
    assert (away.status_code, away.json()["error"]["code"]) == (503, "database_unavailable")
    assert "Try again in a moment" in away.json()["error"]["message"]

    settings.API_THROTTLE_RATES = {user.get_username(): "1/minute"}  # type: ignore[attr-defined]
    caches["rate_limit"].clear()
    assert api.get("/v1/api/collections").status_code == 200
    throttled = api.get("/v1/api/collections")
    assert (throttled.status_code, throttled.json()["error"]["code"]) == (429, "throttled")


GUIDE = sec(
    "Field guide",
    "Volcanoes: where they form and how they erupt.",
    sec("Formation", "Where volcanoes form.", "Volcanoes form where magma reaches the surface."),
    sec("Eruptions", "How volcanoes erupt.", "Shield volcanoes erupt gently."),
)


@pytest.mark.django_db
def test_a_page_shows_the_model_failing_as_a_message_not_an_error_page(
    scripted_llm: ScriptedOpenAIServer, settings: SettingsWrapper
) -> None:
    """The document page's edits answer every kind in the edit panel: here a 503 (the model
    failed to write a summary, a ServiceUnavailableError) from a model server answering 500."""
    settings.LLM_MAX_RETRIES = 1
    scripted_llm.script_chat(status(500), status(500))  # the first try and its one retry
    owner = UserFactory.create()
    document = DocumentFactory.create(
        collection=CollectionFactory.create(owner=owner), content=sec_text(GUIDE)
    )
    tree_save(document, sec_tree(GUIDE))
    section = document.nodes.get(title="Formation")
    browser = Client()
    browser.force_login(owner)

    answer = browser.post(reverse("documents:edit", args=[document.pk, "regenerate"]), {"node": section.pk})

    assert answer.status_code == 302, "the edit panel shows it; no error page"
    shown = browser.get(answer["Location"]).content.decode()
    assert "The model failed to write a summary" in shown and "nothing was changed" in shown
    section.refresh_from_db()
    assert section.summary == "Where volcanoes form."


@pytest.mark.django_db
def test_a_page_answers_a_refusal_and_a_missing_thing_with_their_status() -> None:
    owner, member = UserFactory.create(), UserFactory.create()
    collection = CollectionFactory.create(owner=owner)
    collection.members.add(member)
    browser = Client()
    browser.force_login(member)
    refused = browser.post(reverse("documents:collection", args=[collection.slug]), {"name": "Mine now"})
    assert refused.status_code == 403 and "Only the collection&#x27;s owner" in refused.content.decode()
    missing = browser.get(reverse("documents:detail", args=[987654]))
    assert missing.status_code == 404
