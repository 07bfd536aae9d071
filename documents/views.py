"""The corpus pages. Views only parse, call a selector or service, and render; a user sees only
the collections they own or are a member of (``documents.selectors``)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from documents import selectors


@login_required
def home(request: HttpRequest) -> HttpResponse:
    context = {
        "collections": selectors.collection_list(user=request.user),
        "documents": selectors.document_list(user=request.user)[:50],
    }
    return render(request, "documents/home.html", context)


@login_required
def document_detail(request: HttpRequest, pk: int) -> HttpResponse:
    document = selectors.document_get(user=request.user, pk=pk)  # NotFoundError: a 404 page
    nodes = selectors.document_nodes(document=document)
    return render(request, "documents/detail.html", {"document": document, "nodes": nodes})
