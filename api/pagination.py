"""Limit/offset pages for the list endpoints (``?limit=&offset=``, DRF's own pagination), over a
queryset in a total order (every list ends its ``order_by`` with the id), so pages never shift."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from api.params import PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX, PAGE_OFFSET_MAX, query_integer


class Pages(LimitOffsetPagination):
    default_limit = PAGE_LIMIT_DEFAULT
    max_limit = PAGE_LIMIT_MAX

    # DRF reads a limit it cannot parse as the default and an offset as 0; refuse them instead.
    def get_limit(self, request: Request) -> int:
        return query_integer(
            request, self.limit_query_param, default=PAGE_LIMIT_DEFAULT, minimum=1, maximum=PAGE_LIMIT_MAX
        )

    def get_offset(self, request: Request) -> int:
        return query_integer(request, self.offset_query_param, default=0, minimum=0, maximum=PAGE_OFFSET_MAX)


def paginate(
    request: Request,
    queryset: QuerySet[Any],
    present: Callable[[list[Any]], list[Any]] | type[serializers.BaseSerializer[Any]],
) -> Response:
    """A page of ``queryset``, each item as ``present`` shapes the page (a presenter over the
    items, or a serializer class)."""
    pages = Pages()
    page = pages.paginate_queryset(queryset, request) or []
    if isinstance(present, type):
        serializer: Any = present  # a serializer class (TreeEditSerializer)
        return pages.get_paginated_response(serializer(page, many=True).data)
    return pages.get_paginated_response(present(page))


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
