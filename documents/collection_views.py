"""The collection pages: the list (and making one), a collection's settings (rename, share,
delete: its owner only), and answering an invitation. Views only parse, call a selector or
service, and render; a user sees only the collections they own or are a member of."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from documents import selectors
from documents.services.collections import collection_create, collection_delete, collection_update
from documents.services.sharing import invitation_accept, invitation_decline
from openfable.errors import PermissionDeniedError, UserInputError
from openfable.http import HtmxHttpRequest


@login_required
def collections_page(request: HtmxHttpRequest) -> HttpResponse:
    """The collections a person can see; a new one is theirs."""
    error: UserInputError | None = None
    if request.method == "POST":
        try:
            made = collection_create(
                name=request.POST.get("name", ""), slug=request.POST.get("slug", ""), owner=request.user
            )
        except UserInputError as problem:
            error = problem
        else:
            messages.success(request, f"Made “{made.name}”.")
            return redirect("documents:collection", slug=made.slug)
    collections = (
        selectors.collection_list(user=request.user).select_related("owner").prefetch_related("members")
    )
    return render(
        request,
        "documents/collections.html",
        {
            "collections": collections,
            "invitations": selectors.invitations_for(user=request.user),
            "error": error,
        },
        status=400 if error else 200,
    )


@login_required
@require_POST
def invitation_answer(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Accept (``accept`` in the form) or decline an invitation to share a collection."""
    if "accept" in request.POST:
        collection = invitation_accept(invitation_id=pk, user=request.user)
        messages.success(
            request, f"“{collection.name}” is shared with you: its documents are in your searches now."
        )
    else:
        invitation_decline(invitation_id=pk, user=request.user)
        messages.success(request, "Declined.")
    return redirect("documents:collections")


@login_required
def collection_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Rename, share (members by username) or delete a collection: its owner only."""
    collection = selectors.collection_get(user=request.user, collection=slug)
    manages = selectors.collection_may_manage(user=request.user, collection=collection)
    error: UserInputError | None = None
    if request.method == "POST":
        try:
            if not manages:
                raise PermissionDeniedError("Only the collection's owner can rename, share or delete it.")
            if request.POST.get("delete") == collection.slug:
                collection_delete(collection=collection)
                messages.success(request, f"Deleted “{collection.name}” and its documents.")
                return redirect("documents:collections")
            if "delete" in request.POST:
                raise UserInputError(f"Type the slug {collection.slug!r} to confirm the deletion.")
            names = [name.strip() for name in request.POST.get("members", "").split(",") if name.strip()]
            collection_update(
                collection=collection,
                name=request.POST.get("name", collection.name),
                members=names,
                by=request.user,
            )
            messages.success(
                request, "Saved. People not yet members are invited: they join when they accept."
            )
            return redirect("documents:collection", slug=collection.slug)
        except UserInputError as problem:
            error = problem
    context = {
        "collection": collection,
        "manages": manages,
        "members": ", ".join(member.get_username() for member in collection.members.all()),
        "invited": ", ".join(selectors.collection_invited(collection=collection)),
        "document_count": collection.documents.count(),
        "error": error,
    }
    return render(request, "documents/collection.html", context, status=error.status if error else 200)
