"""POST /v1/api/query: budgeted retrieval, in the original OpenFable shape with the full result
beside it (``RetrievalResult.to_answer``, the answer of every surface)."""

from __future__ import annotations

from django.urls import reverse
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
            # Only a missing budget takes the default (the engine's): 0 is refused in its words, not replaced.
            token_budget=fields.get("token_budget"),
            top_k=fields.get("top_k"),
            order=fields.get("order"),
            mode=fields.get("mode"),
            collection=fields.get("collection") or None,
            documents=fields.get("documents") or None,
            tags=fields.get("tags") or None,
            user=request.user,
        )
        answer = result.to_answer()
        for document in answer["documents"]:  # the REST API's own link, as on every document it shows
            document["original"] = reverse("api:document-original", args=[document["document_id"]])
        return Response(answer)
