"""/v1/api/tokens: who may make, list and revoke API tokens, through DRF's test client and the real
database."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from openfable.api_tokens import token_user
from openfable.models import ApiToken
from tests.api.conftest import People

pytestmark = pytest.mark.django_db

API = "/v1/api"


def test_a_token_cannot_make_tokens_that_would_outlive_it(people: People) -> None:
    """Otherwise whoever holds a leaked token makes a second one, and revoking the first (all the
    person knows of) leaves the second working."""
    program = people.client(people.owner)
    before = ApiToken.objects.count()
    refused = program.post(f"{API}/tokens", {"name": "spare key"}, format="json")
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "session_required"
    assert "cannot make tokens" in error["message"] and "Sign in" in error["message"]
    assert ApiToken.objects.count() == before, "nothing was made"

    # Signed in (the web app's session, as the tokens page and a browser use the API), it works.
    signed_in = APIClient()
    signed_in.force_login(people.owner)
    made = signed_in.post(f"{API}/tokens", {"name": "laptop"}, format="json")
    assert made.status_code == 201 and token_user(made.json()["key"]) is not None


def test_a_token_may_still_list_and_revoke_tokens(people: People) -> None:
    """Listing shows no key and revoking only takes access away: a program may revoke its own."""
    program = people.client(people.owner)
    listed = program.get(f"{API}/tokens")
    assert listed.status_code == 200 and [token["name"] for token in listed.json()] == ["tests"]
    own = listed.json()[0]["id"]
    assert program.delete(f"{API}/tokens/{own}").status_code == 204
    assert program.get(f"{API}/tokens").status_code == 401, "revoked at once, itself included"
