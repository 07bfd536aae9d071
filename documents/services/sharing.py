"""Sharing a collection: its owner invites people, and each becomes a member by accepting.

A member's queries and lists cover the collections shared with them. If adding someone made
them a member at once, anyone could put a document of their choosing into a stranger's results
(make a collection, add the stranger, upload); so an owner's list of members is an offer, and
the collection's documents count for that person only once they accept it. Leaving someone
off the list withdraws the invitation or ends the membership.

Names are offered whether or not an account has them (``CollectionInvitation.username``): an
owner's list is answered alike for both, so that sharing a collection cannot be used to find out
which account names exist (before: an unknown one was a 404 ``unknown_user``, a real one a 200).
Against invitation spam, one person sends at most ``OPENFABLE_INVITATIONS_PER_DAY`` in any 24
hours, and an invitation someone declined cannot be sent again for
``OPENFABLE_INVITATION_DECLINED_DAYS``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.db import transaction
from django.utils import timezone

from documents.models import Collection, CollectionInvitation
from documents.selectors import invitations_for
from documents.services.trees import corpus_version_bump
from openfable.errors import ConflictError, NotFoundError, TooManyAttemptsError, UserInputError

_DAY_SECONDS = 24 * 3600


@transaction.atomic
def collection_members_set(
    *, collection: Collection, users: Iterable[Any], invited_by: Any = None, at_once: bool = False
) -> None:
    """Make ``users`` (people, or their usernames; the owner aside) the people the collection is
    shared with.

    Members already in the list stay; the others are invited, by name, whether or not an account
    has that name (``at_once``: people made members directly, for the operator's admin, trusted
    like its other powers); members and pending invitations not in the list are removed.
    ``TooManyAttemptsError`` when ``invited_by`` has sent their day's invitations;
    ``ConflictError`` for a name whose invitation was declined lately.
    """
    names = _names(users)
    owner_name = collection.owner.get_username() if collection.owner is not None else None
    names = [name for name in names if name != owner_name]
    people = {person.get_username(): person for person in get_user_model().objects.filter(username__in=names)}
    wanted_ids = {person.pk for person in people.values()}
    members = set(collection.members.values_list("pk", flat=True))
    collection.members.remove(*(members - wanted_ids))
    # A declined invitation stays for its cool-down even when its name leaves the list.
    collection.invitations.filter(declined__isnull=True).exclude(username__in=names).delete()
    newcomers = [name for name in names if people.get(name) is None or people[name].pk not in members]
    if at_once:
        unknown = [name for name in newcomers if name not in people]
        if unknown:
            raise NotFoundError(
                f"No user named {', '.join(repr(name) for name in unknown)}.", code="unknown_user"
            )
        collection.members.add(*(people[name] for name in newcomers))
        collection.invitations.filter(username__in=newcomers).delete()
    else:
        sent = {invitation.username: invitation for invitation in collection.invitations.all()}
        fresh = [name for name in newcomers if _may_invite_again(sent.get(name))]
        _count_invitations(inviter=invited_by, count=len(fresh))
        collection.invitations.filter(username__in=fresh).delete()  # declined long ago: offered anew
        CollectionInvitation.objects.bulk_create(
            CollectionInvitation(
                collection=collection, username=name, user=people.get(name), invited_by=_person(invited_by)
            )
            for name in fresh
        )
    # Who may see what changed: results cached for a user must not outlive it.
    corpus_version_bump()


def _names(users: Iterable[Any]) -> list[str]:
    """Usernames, in the order given, once each; a person given as themselves counts by name."""
    names: list[str] = []
    for user in users:
        name = (user if isinstance(user, str) else user.get_username()).strip()
        if "\x00" in name or len(name) > 150:
            raise UserInputError(f"{name[:40]!r} is not a username: at most 150 characters, no NUL.")
        if name and name not in names:
            names.append(name)
    return names


def _may_invite_again(invitation: CollectionInvitation | None) -> bool:
    """Whether a name needs a new invitation: none yet, or one declined long enough ago (a pending
    one stands). A decline within the cool-down is refused in words."""
    if invitation is None:
        return True
    if invitation.declined is None:
        return False
    again = invitation.declined + timedelta(days=settings.INVITATION_DECLINED_DAYS)
    if timezone.now() < again:
        raise ConflictError(
            f"{invitation.username} declined an invitation to this collection on "
            f"{invitation.declined:%Y-%m-%d}; you can invite them again from {again:%Y-%m-%d}. "
            "Leave the name out of the list until then.",
            code="invitation_declined",
            details={"username": invitation.username, "invite_again_from": again.isoformat()},
        )
    return True


def _count_invitations(*, inviter: Any, count: int) -> None:
    """Count ``count`` new invitations from ``inviter`` in a 24-hour window (the ``rate_limit``
    cache, shared by every web worker, as the request rates are); refuse all of them when they
    would pass OPENFABLE_INVITATIONS_PER_DAY. A trusted caller (no person) is not counted."""
    if not count or not getattr(inviter, "is_authenticated", False):
        return
    cache, key, now = caches["rate_limit"], f"invitations_sent_{inviter.pk}", time.time()
    sent = [moment for moment in cache.get(key, []) if moment > now - _DAY_SECONDS]
    limit = settings.INVITATIONS_PER_DAY
    if len(sent) + count > limit:
        wait = (
            int(sent[len(sent) + count - limit - 1] + _DAY_SECONDS - now) + 1
            if count <= limit
            else _DAY_SECONDS
        )
        hours = max(1, round(wait / 3600))
        raise TooManyAttemptsError(
            f"You can send at most {limit} invitations a day (OPENFABLE_INVITATIONS_PER_DAY); you have "
            f"sent {len(sent)} in the last 24 hours, and this list adds {count}. Try again in about "
            f"{hours} hour{'s' if hours != 1 else ''}, or invite fewer people at once.",
            code="too_many_invitations",
            details={"retry_after_seconds": wait, "limit": limit},
        )
    cache.set(key, sent + [now] * count, _DAY_SECONDS)


@transaction.atomic
def invitation_accept(*, invitation_id: int, user: Any) -> Collection:
    """``user`` accepts an invitation of theirs: the collection is shared with them from now on."""
    invitation = _invitation_of(invitation_id=invitation_id, user=user)
    collection = invitation.collection
    collection.members.add(user)
    invitation.delete()
    corpus_version_bump()
    return collection


@transaction.atomic
def invitation_decline(*, invitation_id: int, user: Any) -> None:
    """``user`` declines an invitation of theirs; the owner may invite them again after
    OPENFABLE_INVITATION_DECLINED_DAYS (the declined invitation is kept until then)."""
    invitation = _invitation_of(invitation_id=invitation_id, user=user)
    invitation.declined = timezone.now()
    invitation.user = user
    invitation.save(update_fields=["declined", "user"])


def _invitation_of(*, invitation_id: int, user: Any) -> CollectionInvitation:
    found = (
        invitations_for(user=user)
        .select_related("collection")
        .select_for_update(of=("self",))
        .filter(pk=invitation_id)
        .first()
    )
    if found is None:
        raise NotFoundError(
            f"You have no invitation {invitation_id}; the list of your invitations has their ids."
        )
    return found


def _person(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None
