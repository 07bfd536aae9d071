"""API tokens: made, revoked and checked here, for the REST API, the MCP server and the UI alike.

A key is ``of_`` + 43 random URL-safe characters (256 bits). Only its sha256 is stored: a key
of that entropy needs no slow hash, and a lookup by hash is one indexed query. The key is
returned once, by ``token_create``; afterwards a person sees its name and first characters.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from openfable.errors import UserInputError
from openfable.models import ApiToken

KEY_PREFIX = "of_"
_SHOWN_CHARS = 10
# last_used is written at most this often per token: a busy client must not make every
# request a write.
_LAST_USED_RESOLUTION = timedelta(minutes=1)


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@transaction.atomic
def token_create(*, user: Any, name: str) -> tuple[ApiToken, str]:
    """A new token for ``user``; returns it and the key, which is never shown again."""
    name = (name or "").strip()
    if not name:
        raise UserInputError("A token needs a name, e.g. the program that will use it.")
    if len(name) > 100:
        raise UserInputError(f"The token name is {len(name)} characters; names hold at most 100.")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=key[:_SHOWN_CHARS], key_hash=_hash(key))
    return token, key


def token_revoke(*, token: ApiToken) -> ApiToken:
    """Stop a token at once: the next request with it is refused."""
    if token.revoked is None:
        token.revoked = timezone.now()
        token.save(update_fields=["revoked"])
    return token


def tokens_revoke_all(*, user: Any) -> int:
    """Stop every active token of ``user`` at once; how many there were."""
    return ApiToken.objects.filter(user=user, revoked__isnull=True).update(revoked=timezone.now())


class TokensEndWithThePassword:
    """A password "validator" (``AUTH_PASSWORD_VALIDATORS``) that checks nothing: Django calls its
    ``password_changed`` whenever a password is set (the password change and reset pages, the
    admin, ``changepassword``), and it revokes the person's API tokens then. Someone who changes a
    password because it leaked expects every way in made with it to close; a token made by
    whoever held it would otherwise keep working. Django's own re-hashing of a password at
    sign-in (a stronger hasher after an upgrade) is not a change and revokes nothing."""

    def validate(self, password: str, user: Any = None) -> None:
        return None

    def password_changed(self, password: str, user: Any = None) -> None:
        if user is not None and user.pk is not None:
            tokens_revoke_all(user=user)

    def get_help_text(self) -> str:
        return "Changing your password revokes your API tokens."


def token_user(key: str) -> tuple[Any, ApiToken] | None:
    """The active user and token a key belongs to, or None (unknown, revoked, or the user is inactive)."""
    if not key or not key.startswith(KEY_PREFIX):
        return None
    token = ApiToken.objects.select_related("user").filter(key_hash=_hash(key), revoked__isnull=True).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used is None or now - token.last_used > _LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        token.last_used = now
    return token.user, token


def tokens_of(*, user: Any) -> Any:
    return ApiToken.objects.filter(user=user)
