from __future__ import annotations

from django.urls import path

from retrieval import views

app_name = "retrieval"

urlpatterns = [
    path("query/", views.query_page, name="query"),
    path("documents/<int:pk>/ask", views.document_ask, name="document-ask"),
]
