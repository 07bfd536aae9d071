"""Limit/offset pages for the list endpoints (``?limit=&offset=``, DRF's own pagination)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response


class Pages(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


def paginate(request: Request, queryset: QuerySet[Any], serializer_class: Any) -> Response:
    pages = Pages()
    page = pages.paginate_queryset(queryset, request)
    return pages.get_paginated_response(serializer_class(page, many=True).data)


def paginated(serializer_class: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The schema of a page of ``serializer_class`` items, as ``Pages`` answers it."""
    return type(
        f"Paginated{serializer_class.__name__.removesuffix('Serializer')}List",
        (serializers.Serializer,),
        {
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": serializer_class(many=True),
        },
    )
