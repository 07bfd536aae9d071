"""POST /v1/api/query: budgeted retrieval, in the original OpenFable shape with the full result beside it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.serializers import QueryRequestSerializer, QueryResponseSerializer
from api.views.documents import ERRORS
from retrieval.result import RetrievalResult
from retrieval.services import retrieve

_ROUTING = {"documents": "document_level", "nodes": "node_level"}


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
        return Response(query_response(result))


def query_response(result: RetrievalResult) -> dict[str, Any]:
    """The original API's fields (``routing``, ``documents``, ``chunks``, ...) and ``result`` beside them."""
    routing = _ROUTING[result.routing]
    whole = {chunk.document_id: chunk.text for chunk in result.chunks if chunk.kind == "root"}
    documents = [
        {
            "document_id": hit.document_id,
            "title": hit.title,
            "score": hit.score,
            "token_count": hit.token_count,
            "content": whole.get(hit.document_id) if routing == "document_level" else None,
        }
        for hit in result.documents
        if hit.selected
    ]
    chunks = [
        {
            "node_id": chunk.node_id,
            "document_id": chunk.document_id,
            "content": chunk.text,
            "token_count": chunk.token_count,
            "score": chunk.scores.fused,
            "position": position,
            "source": chunk.found_by[0] if chunk.found_by else "",
            "pages": list(chunk.pages),
        }
        for position, chunk in enumerate(result.chunks)
    ]
    return {
        "query": result.query,
        "routing": routing,
        "total_tokens": result.total_tokens,
        "documents": documents,
        "chunks": chunks,
        "result": result.to_dict(),
    }
