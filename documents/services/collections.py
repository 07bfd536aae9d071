"""Writes to collections: create, rename and share, hand to another owner, delete; the default
collection each user gets; and the slug rules. Every surface makes and changes collections
through these functions."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils.text import slugify

from documents.models import Collection, Document
from documents.selectors import collection_get
from documents.services.collection_indexes import collection_index_drop
from documents.services.deletion import documents_clear
from documents.services.document_input import DocumentInputError
from documents.services.sharing import collection_members_set
from documents.services.trees import corpus_version_bump
from openfable.errors import ConflictError

DEFAULT_COLLECTION_SLUG = "default"
# The slugs default collections are given; nobody may choose one for a collection of their own.
RESERVED_SLUG = re.compile(rf"{DEFAULT_COLLECTION_SLUG}(-\d+)*")


def collection_create(*, name: str, slug: str = "", owner: Any = None) -> Collection:
    name = (name or "").strip()
    if not name:
        raise DocumentInputError("A collection needs a name.")
    slug = collection_slug_clean(name=name, slug=slug)
    return Collection.objects.create(name=name[:200], slug=slug, owner=owner)


def collection_slug_clean(*, name: str, slug: str = "") -> str:
    """The slug a new collection gets: the one given, refused when unusable; or one made from the
    name, always usable (the API's schema promises any name works); refused (409) when taken."""
    slug = (slug or "").strip() or _slug_from_name(name)
    slug_check(slug)
    if Collection.objects.filter(slug=slug).exists():
        raise ConflictError(f"A collection with the slug {slug!r} already exists; choose another slug.")
    return slug


def slug_check(slug: str) -> None:
    """The rules a chosen slug keeps (``DocumentInputError`` says which one it breaks)."""
    if slug != slugify(slug):
        raise DocumentInputError(
            f"The slug {slug!r} may hold only lowercase letters, digits, hyphens and underscores."
        )
    if slug.isdigit():
        # Collections are named by slug or id everywhere; an all-digit slug would read as an id.
        raise DocumentInputError(
            f"The slug {slug!r} is all digits; add a letter so it cannot pass for an id."
        )
    if slug_is_reserved(slug):
        raise DocumentInputError(f"The slug {slug!r} is kept for default collections; choose another one.")


def _slug_from_name(name: str) -> str:
    made = slugify(name or "")[:200].strip("-_")
    if not made or made.isdigit() or slug_is_reserved(made):
        # "0", "!!!" or "default" as a name: still a collection, under a slug no id can look like.
        made = f"collection-{made}".strip("-")[:200].strip("-_")
    return made


def collection_default(*, user: Any = None) -> Collection:
    """Where documents go when the caller names no collection, made on first use.

    A trusted caller (the command line: ``user=None``) and superusers share the ownerless
    default; any other user gets a default collection of their own, so their documents stay
    theirs. The default is found by its owner and ``is_default``, never by its slug: a
    collection another user made with a look-alike slug is never taken for it.
    """
    owner = None if user is None or getattr(user, "is_superuser", False) else user
    existing = Collection.objects.filter(owner=owner, is_default=True).first()
    if existing is not None:
        return existing
    if owner is None:
        name, slug = "Default", slug_free(DEFAULT_COLLECTION_SLUG)
    else:
        name, slug = (
            f"{owner.get_username()}'s documents",
            slug_free(f"{DEFAULT_COLLECTION_SLUG}-{owner.pk}"),
        )
    # get_or_create: two first uploads at once make one default (the unique constraint on
    # owner and is_default refuses the second insert, which then reads the first).
    collection, _ = Collection.objects.get_or_create(
        owner=owner, is_default=True, defaults={"name": name, "slug": slug}
    )
    return collection


def slug_free(base: str) -> str:
    """``base``, or ``base-2``, ``base-3``… when a collection holds it (for a default collection: one
    made before slugs were reserved; for an import: the collection it came from)."""
    slug, suffix = base, 1
    while Collection.objects.filter(slug=slug).exists():
        suffix += 1
        slug = f"{base}-{suffix}"
    return slug


def slug_is_reserved(slug: str) -> bool:
    """Slugs of the shape default collections get ("default", "default-12", "default-12-2")."""
    return RESERVED_SLUG.fullmatch(slug) is not None


def collection_resolve(value: Collection | str | int | None, *, user: Any = None) -> Collection:
    """A collection given as itself, its slug or its id (digits in a string count as an id).

    ``None`` or "" is the default collection, made on first use. ``user`` limits the choice to
    the collections that user may see (None: a trusted caller, e.g. the command line).
    """
    if isinstance(value, Collection):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        return collection_default(user=user)
    return collection_get(user=user, collection=value)


@transaction.atomic
def collection_update(
    *,
    collection: Collection,
    name: str | None = None,
    members: Iterable[AbstractBaseUser | str] | None = None,
    by: Any = None,
    members_at_once: bool = False,
) -> Collection:
    """Rename a collection and/or set who besides its owner may see and change it (people, or
    their usernames): names not yet members are invited by ``by`` and become members when they
    accept, whether or not an account has the name yet (``documents.services.sharing``;
    ``members_at_once`` skips that, for the operator's admin)."""
    if name is not None:
        name = name.strip()
        if not name:
            raise DocumentInputError("A collection needs a name.")
        collection.name = name[:200]
        collection.save(update_fields=["name"])
    if members is not None:
        collection_members_set(collection=collection, users=members, invited_by=by, at_once=members_at_once)
    # Who may see what changed: results cached for a user must not outlive it.
    corpus_version_bump()
    return collection


@transaction.atomic
def collection_owner_set(*, collection: Collection, owner: Any = None, name: str | None = None) -> Collection:
    """Hand ``collection`` to ``owner`` (None: the operator's, like the command line's), renamed to
    ``name`` if given. A default collection handed on becomes an ordinary one: its new owner has a
    default of their own, or gets one on first use, and the database holds one per owner (before,
    handing one to the operator beside the ownerless default failed on that constraint, a 500)."""
    # Compared with the stored row, not the instance: an admin form has already set the new owner on it.
    stored_owner_id = (
        Collection.objects.select_for_update()
        .filter(pk=collection.pk)
        .values_list("owner_id", flat=True)
        .first()
    )
    fields = []
    if getattr(owner, "pk", None) != stored_owner_id:
        collection.owner = owner
        collection.is_default = False
        fields += ["owner", "is_default"]
    if name is not None and name != collection.name:
        collection.name = name[:200]
        fields.append("name")
    if fields:
        collection.save(update_fields=fields)
    return collection


@transaction.atomic
def collection_delete(*, collection: Collection) -> None:
    """Delete a collection with every document, tree and job in it, and its HNSW index.

    Safe while its documents index: see ``documents.services.deletion``."""
    collection_id = collection.pk
    locked = Collection.objects.select_for_update().filter(pk=collection_id)
    if not locked.exists():
        return  # deleted meanwhile
    documents_clear(Document.objects.filter(collection_id=collection_id))
    Collection.objects.filter(pk=collection_id).delete()
    corpus_version_bump()
    transaction.on_commit(lambda: collection_index_drop(collection_id))
