"""Nodes: /v1/api/nodes/{id}."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.serializers import NodeSerializer, NodeUpdateSerializer
from api.views.documents import ERRORS
from documents import selectors
from documents.presenters import node_present
from documents.services.nodes import node_change


class NodeDetailView(APIView):
    @extend_schema(summary="A node with its exact text", responses={200: NodeSerializer, **ERRORS})
    def get(self, request: Request, pk: int) -> Response:
        return Response(node_present(selectors.node_get(user=request.user, pk=pk)))

    @extend_schema(
        summary="Change a node's title or summary, or exclude it (and its subtree) from retrieval",
        request=NodeUpdateSerializer,
        responses={200: NodeSerializer, **ERRORS},
    )
    def patch(self, request: Request, pk: int) -> Response:
        node = selectors.node_get(user=request.user, pk=pk)
        data = NodeUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        node_change(node=node, user=request.user, **data.validated_data)
        return Response(node_present(selectors.node_get(user=request.user, pk=pk)))
