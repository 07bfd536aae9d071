"""Swagger UI at /docs and ReDoc at /redoc, served offline (drf-spectacular-sidecar), over /v1/api/schema/."""

from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

urlpatterns = [
    path("docs", SpectacularSwaggerView.as_view(url_name="api:schema"), name="swagger-ui"),
    path("redoc", SpectacularRedocView.as_view(url_name="api:schema"), name="redoc"),
]
