from __future__ import annotations

from django.urls import path

from documents import views

app_name = "documents"

urlpatterns = [
    path("", views.home, name="home"),
    path("documents/<int:pk>/", views.document_detail, name="detail"),
]
