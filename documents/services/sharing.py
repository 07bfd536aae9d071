"""Sharing a collection: its owner invites people, and each becomes a member by accepting.

A member's queries and lists cover the collections shared with them. If adding someone made
them a member at once, anyone could put a document of their choosing into a stranger's results
(make a collection, add the stranger, upload); so an owner's list of members is an offer, and
the collection's documents count for that person only once they accept it. Leaving someone
off the list withdraws the invitation or ends the membership.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from documents.models import Collection, CollectionInvitation
from documents.services.trees import corpus_version_bump
from openfable.errors import NotFoundError


@transaction.atomic
def collection_members_set(
    *, collection: Collection, users: Iterable[Any], invited_by: Any = None, at_once: bool = False
) -> None:
    """Make ``users`` (besides the owner) the people the collection is shared with.

    Members already in the list stay; the others are invited (``at_once``: made members
    directly, for the operator's admin, trusted like its other powers); members and invitations
    not in the list are removed.
    """
    wanted = {user.pk: user for user in users if user.pk != collection.owner_id}
    members = set(collection.members.values_list("pk", flat=True))
    collection.members.remove(*(members - set(wanted)))
    collection.invitations.exclude(user_id__in=list(wanted)).delete()
    newcomers = [pk for pk in wanted if pk not in members]
    if at_once:
        collection.members.add(*newcomers)
        collection.invitations.filter(user_id__in=newcomers).delete()
    else:
        invited = set(collection.invitations.values_list("user_id", flat=True))
        CollectionInvitation.objects.bulk_create(
            CollectionInvitation(collection=collection, user_id=pk, invited_by=_person(invited_by))
            for pk in newcomers
            if pk not in invited
        )
    # Who may see what changed: results cached for a user must not outlive it.
    corpus_version_bump()


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
    """``user`` declines an invitation of theirs; the owner may invite them again."""
    _invitation_of(invitation_id=invitation_id, user=user).delete()


def _invitation_of(*, invitation_id: int, user: Any) -> CollectionInvitation:
    found = (
        CollectionInvitation.objects.select_related("collection")
        .select_for_update(of=("self",))
        .filter(pk=invitation_id, user_id=user.pk)
        .first()
    )
    if found is None:
        raise NotFoundError(
            f"You have no invitation {invitation_id}; the list of your invitations has their ids."
        )
    return found


def _person(user: Any) -> Any:
    return user if getattr(user, "is_authenticated", False) else None
