"""Django's usual password validators on every page that sets a password: the admin's add-user and
set-password forms and the person's own password change page (``createsuperuser`` and
``changepassword`` run the same validators)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db

GOOD = "quiet-harbour-lantern-47"
# (password, what the refusal says): too short, common, all digits, like the username.
WEAK = [
    ("x7#kq", "too short"),
    ("password123", "too common"),
    ("8302917465", "entirely numeric"),
    ("margaret.hamilton", "too similar"),
]


@pytest.fixture
def person() -> User:
    return get_user_model().objects.create_user(username="margaret.hamilton", password=GOOD)


@pytest.mark.parametrize(("password", "says"), WEAK, ids=[says for _, says in WEAK])
def test_the_admin_refuses_a_weak_password_for_a_new_user(
    admin_client: Client, password: str, says: str
) -> None:
    if says == "too similar":
        password = "grace.hopper"
    answer = admin_client.post(
        "/admin/auth/user/add/",
        {"username": "grace.hopper", "password1": password, "password2": password, "usable_password": "true"},
    )
    assert answer.status_code == 200 and says in answer.content.decode()
    assert not get_user_model().objects.filter(username="grace.hopper").exists()
    made = admin_client.post(
        "/admin/auth/user/add/",
        {"username": "grace.hopper", "password1": GOOD, "password2": GOOD, "usable_password": "true"},
    )
    assert made.status_code == 302 and get_user_model().objects.filter(username="grace.hopper").exists()


@pytest.mark.parametrize(("password", "says"), WEAK, ids=[says for _, says in WEAK])
def test_the_admin_refuses_a_weak_password_for_an_existing_user(
    admin_client: Client, person: User, password: str, says: str
) -> None:
    answer = admin_client.post(
        f"/admin/auth/user/{person.pk}/password/",
        {"password1": password, "password2": password, "usable_password": "true"},
    )
    assert answer.status_code == 200 and says in answer.content.decode()
    person.refresh_from_db()
    assert person.check_password(GOOD), "the password is unchanged"


@pytest.mark.parametrize(("password", "says"), WEAK, ids=[says for _, says in WEAK])
def test_a_person_cannot_change_to_a_weak_password(person: User, password: str, says: str) -> None:
    client = Client()
    client.force_login(person)
    answer = client.post(
        "/accounts/password_change/",
        {"old_password": GOOD, "new_password1": password, "new_password2": password},
    )
    assert answer.status_code == 200 and says in answer.content.decode()
    person.refresh_from_db()
    assert person.check_password(GOOD)
    done = client.post(
        "/accounts/password_change/",
        {
            "old_password": GOOD,
            "new_password1": "another-long-phrase-93",
            "new_password2": "another-long-phrase-93",
        },
    )
    assert done.status_code == 302
