"""Deleting a person: what becomes of the collections and documents they own.

They are kept, not deleted with the account: each becomes the operator's (ownerless, like the
command line's and the superusers' default collection), which every superuser and the command
line see and manage, and whose members keep their access. Nothing anyone wrote or was shared is
lost with an account, and no particular admin has to be chosen or left standing to receive it.
The person's default collection becomes an ordinary collection (the operator already has, or
will get, the one ownerless default); a collection whose name the operator already uses gets the
person's name added. Slugs are unique everywhere, so every link and script keeps working.

Every path that deletes a user goes through ``user_collections_hand_over``: the admin through
``users_delete``, and ``user.delete()`` or a queryset's ``delete()`` (``manage.py shell``, other
apps) through the ``pre_delete`` receiver in ``documents.receivers``. Before, the account's
deletion set its collections' owner to NULL as they were, and a second ownerless default failed
the one-default-per-owner constraint: an IntegrityError, a 500.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Count

from documents.models import Collection
from documents.services.collections import collection_owner_set


@dataclass(frozen=True)
class CollectionHandOver:
    collection_id: int
    name: str  # as it was
    new_name: str  # as the operator sees it: the same, or with the person's name added
    was_default: bool
    document_count: int


@dataclass(frozen=True)
class UserDeletion:
    """What deleting one person does (or did) to their collections."""

    username: str
    collections: tuple[CollectionHandOver, ...]

    @property
    def document_count(self) -> int:
        return sum(collection.document_count for collection in self.collections)

    @property
    def preview(self) -> str:
        """Said on the admin's confirmation page, before anything is deleted."""
        return self._describe(done=False)

    @property
    def outcome(self) -> str:
        """Said once the account is gone."""
        return self._describe(done=True)

    def _describe(self, *, done: bool) -> str:
        if not self.collections:
            return f"{self.username} owns no collections; no documents go with the account."
        count = len(self.collections)
        what = (
            f"{self.username}'s {count} collection{'s' if count != 1 else ''} and their "
            f"{self.document_count} document{'s' if self.document_count != 1 else ''}"
        )
        lead = (
            f"Kept {what}: they are now the operator's"
            if done
            else f"{what} are kept, not deleted: they become the operator's"
        )
        sentences = [
            f"{lead} (ownerless: every superuser and the command line see them; their members keep access)."
        ]
        for collection in self.collections:
            if collection.was_default:
                sentences.append(
                    f"The default collection “{collection.name}” becomes an ordinary collection."
                )
            if collection.new_name != collection.name:
                sentences.append(
                    f"“{collection.name}” is renamed “{collection.new_name}”: "
                    "the operator already has a collection of that name."
                )
        return " ".join(sentences)


def user_deletion_plan(*, user: Any) -> UserDeletion:
    """What deleting ``user`` would do to their collections (the admin's confirmation says it)."""
    owned = list(
        Collection.objects.filter(owner_id=user.pk).annotate(document_count=Count("documents")).order_by("pk")
    )
    taken = set(Collection.objects.filter(owner__isnull=True).values_list("name", flat=True))
    hand_overs = []
    for collection in owned:
        new_name = _name_free(collection.name, user.get_username(), taken)
        taken.add(new_name)
        hand_overs.append(
            CollectionHandOver(
                collection_id=collection.pk,
                name=collection.name,
                new_name=new_name,
                was_default=collection.is_default,
                document_count=collection.document_count,
            )
        )
    return UserDeletion(username=user.get_username(), collections=tuple(hand_overs))


@transaction.atomic
def user_collections_hand_over(*, user: Any) -> UserDeletion:
    """Make ``user``'s collections the operator's, before the account goes; see the module.

    Safe to call twice: the second call finds nothing left to hand over."""
    # Locked first, so a collection made or shared meanwhile is not left behind owned by a row
    # about to vanish (and then set to NULL as it is, default flag and all).
    list(Collection.objects.select_for_update().filter(owner_id=user.pk).order_by("pk").values_list("pk"))
    plan = user_deletion_plan(user=user)
    for hand_over in plan.collections:
        collection = Collection.objects.get(pk=hand_over.collection_id)
        collection_owner_set(collection=collection, owner=None, name=hand_over.new_name)
    # No corpus version bump: nobody still here sees more or less than before (superusers and
    # the command line saw these collections already; members keep theirs).
    return plan


@transaction.atomic
def users_delete(*, users: Iterable[Any]) -> list[UserDeletion]:
    """Delete these accounts, their collections and documents kept as the operator's; one
    transaction, so a bulk deletion in the admin happens wholly or not at all."""
    deletions = []
    for user in users:
        deletions.append(user_collections_hand_over(user=user))
        user.delete()  # the pre_delete receiver finds nothing left to hand over
    return deletions


def user_delete(*, user: Any) -> UserDeletion:
    return users_delete(users=[user])[0]


def _name_free(name: str, username: str, taken: set[str]) -> str:
    """``name``, or ``name (username)``, ``name (username) 2``… when the operator has one so named:
    names are not unique, but two "Contracts" in one list would leave a superuser guessing."""
    if name not in taken:
        return name
    base = f"{name[: 200 - len(username) - 8]} ({username})"
    candidate, suffix = base, 1
    while candidate in taken:
        suffix += 1
        candidate = f"{base} {suffix}"
    return candidate
