"""POST /v1/api/query: budgeted retrieval, in the original OpenFable shape with the full result
beside it (``RetrievalResult.to_answer``, the answer of every surface)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.serializers import QueryRequestSerializer, QueryResponseSerializer
from api.views.documents import ERRORS
from retrieval.services import retrieve


class QueryView(APIView):
    @extend_schema(
        summary="The most relevant text within a token budget, in document order",
        request=QueryRequestSerializer,
        responses={200: QueryResponseSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        data = QueryRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        result = retrieve(
            query=fields["query"],
            # Only a missing budget takes the default: 0 is refused in the engine's words, not replaced.
            token_budget=fields.get("token_budget", settings.TOKEN_BUDGET_DEFAULT),
            mode=fields.get("mode"),
            collection=fields.get("collection") or None,
            documents=fields.get("documents") or None,
            tags=fields.get("tags") or None,
            user=request.user,
        )
        return Response(result.to_answer())
