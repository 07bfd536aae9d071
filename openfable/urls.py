from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("v1/api/", include("api.urls")),
    path("", include("api.docs_urls")),
    path("", include("retrieval.urls")),
    path("", include("documents.urls")),
]
