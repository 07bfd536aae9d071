from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from documents import selectors
from documents.models import Document


def home(request: HttpRequest) -> HttpResponse:
    context = {
        "collections": selectors.collection_list(),
        "documents": selectors.document_list()[:50],
    }
    return render(request, "documents/home.html", context)


def document_detail(request: HttpRequest, pk: int) -> HttpResponse:
    document = get_object_or_404(Document.objects.select_related("collection"), pk=pk)
    nodes = selectors.document_nodes(document=document)
    return render(request, "documents/detail.html", {"document": document, "nodes": nodes})
