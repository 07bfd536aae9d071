from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from openfable import views

# An error escaping outside any view still answers an API path in the API's JSON shape.
handler500 = "openfable.http.server_error"

urlpatterns = [
    # Browsers and crawlers ask for /favicon.ico whatever the page links: the SVG icon answers.
    path("favicon.ico", views.favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("accounts/tokens/", views.tokens_page, name="tokens"),
    path("accounts/tokens/<int:pk>/revoke", views.token_revoke_view, name="token-revoke"),
    path("v1/api/", include("api.urls")),
    path("", include("api.docs_urls")),
    path("", include("retrieval.urls")),
    path("", include("web.urls")),
]
