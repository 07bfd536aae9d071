"""The person's own settings page: API tokens (made, shown once, revoked); the site's icon."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from openfable.api_tokens import token_create, token_revoke, tokens_of
from openfable.errors import NotFoundError, UserInputError


# never_cache: the answer to the form shows a new key, which no browser or proxy cache may keep
# (Cache-Control: no-store, as the admin's pages send).
@never_cache
@login_required
def tokens_page(request: HttpRequest) -> HttpResponse:
    context: dict[str, object] = {"tokens": tokens_of(user=request.user)}
    status = 200
    if request.method == "POST":
        try:
            token, key = token_create(user=request.user, name=request.POST.get("name", ""))
        except UserInputError as error:
            context["error"] = error
            status = 400
        else:
            # Shown on this answer only: the key is not stored, only its hash.
            context |= {"new_token": token, "new_key": key, "tokens": tokens_of(user=request.user)}
    return render(request, "openfable/tokens.html", context, status=status)


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    token = tokens_of(user=request.user).filter(pk=pk).first()
    if token is None:
        raise NotFoundError(f"You have no token {pk}.")
    token_revoke(token=token)
    messages.success(request, f"Revoked “{token.name}”: it no longer works.")
    return redirect("tokens")


def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, asked for by browsers on every site: the icon the pages link, from static."""
    response = HttpResponseRedirect(static("openfable/favicon.svg"))
    response["Cache-Control"] = "public, max-age=86400"
    return response
