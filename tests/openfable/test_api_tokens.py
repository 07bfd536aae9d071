"""API tokens end when their person's password changes (any way Django sets one), and every answer
that shows a new key tells caches not to store it."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from pytest_django.fixtures import Settings
from rest_framework.test import APIClient

from openfable.api_tokens import token_create, token_user
from openfable.models import ApiToken

pytestmark = pytest.mark.django_db

PASSWORD = "quiet-harbour-lantern-47"
NEW_PASSWORD = "another-long-phrase-93"


@pytest.fixture
def person() -> User:
    return get_user_model().objects.create_user(username="ada", password=PASSWORD)


def _works(key: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return bool(client.get("/v1/api/collections").status_code == 200)


def test_changing_the_password_on_its_page_ends_every_token(person: User) -> None:
    keys = [token_create(user=person, name=name)[1] for name in ("laptop", "ci")]
    other_key = token_create(user=get_user_model().objects.create_user(username="grace"), name="x")[1]
    assert all(_works(key) for key in keys)
    client = Client()
    client.force_login(person)
    changed = client.post(
        "/accounts/password_change/",
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert changed.status_code == 302
    assert not any(_works(key) for key in keys), "a token made before the change still works"
    refused = APIClient()
    refused.credentials(HTTP_AUTHORIZATION=f"Bearer {keys[0]}")
    message = refused.get("/v1/api/collections").json()["error"]["message"]
    assert "changing the password revokes every token" in message
    assert all(token.revoked is not None for token in ApiToken.objects.filter(user=person)), (
        "listed as revoked"
    )
    assert _works(other_key), "another person's tokens are not touched"
    assert _works(token_create(user=person, name="after")[1]), "a token made after the change works"


def test_an_administrator_setting_the_password_ends_the_tokens(admin_client: Client, person: User) -> None:
    _, key = token_create(user=person, name="laptop")
    set_password = admin_client.post(
        f"/admin/auth/user/{person.pk}/password/",
        {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"},
    )
    assert set_password.status_code == 302 and token_user(key) is None


def test_set_password_from_code_and_changepassword_end_the_tokens(
    person: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, key = token_create(user=person, name="laptop")
    person.set_password(NEW_PASSWORD)
    person.save()
    assert token_user(key) is None
    _, key = token_create(user=person, name="laptop again")
    monkeypatch.setattr("getpass.getpass", lambda prompt="": PASSWORD)
    call_command("changepassword", "ada", stdout=io.StringIO())
    assert token_user(key) is None


def test_a_rehash_at_sign_in_is_not_a_password_change(person: User, settings: Settings) -> None:
    """Django re-hashes a password with the preferred hasher when its owner signs in (after an
    upgrade): the password is the same, and the tokens keep working."""
    get_user_model().objects.filter(pk=person.pk).update(
        password=make_password(PASSWORD, hasher="pbkdf2_sha256")
    )
    _, key = token_create(user=person, name="laptop")
    client = Client()
    assert client.post("/accounts/login/", {"username": "ada", "password": PASSWORD}).status_code == 302
    person.refresh_from_db()
    assert person.password.startswith("md5$"), "re-hashed with the preferred hasher"
    assert token_user(key) is not None


def test_every_answer_showing_a_new_key_is_not_stored_by_caches(admin_client: Client, person: User) -> None:
    client = Client()
    client.force_login(person)
    page = client.post("/accounts/tokens/", {"name": "scripts"})
    assert 'id="new-key"' in page.content.decode() and "no-store" in page["Cache-Control"]

    signed_in = APIClient()
    signed_in.force_login(person)
    made = signed_in.post("/v1/api/tokens", {"name": "laptop"}, format="json")
    assert made.status_code == 201 and "no-store" in made["Cache-Control"]

    added = admin_client.post(
        "/admin/openfable/apitoken/add/", {"user": person.pk, "name": "ci"}, follow=True
    )
    assert "copy it now" in added.content.decode() and "no-store" in added["Cache-Control"]
