"""Swagger UI at /docs, served from this machine (drf-spectacular-sidecar) over /v1/api/schema/, to
people signed in. /redoc, once ReDoc, leads there: ReDoc's bundle loads its logo from a CDN."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.urls import path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularSwaggerView

urlpatterns = [
    # login_required: a person not signed in goes to the sign-in page and back, not to a bare 401.
    path("docs", login_required(SpectacularSwaggerView.as_view(url_name="api:schema")), name="swagger-ui"),
    path("redoc", RedirectView.as_view(pattern_name="swagger-ui", permanent=False), name="redoc"),
]
