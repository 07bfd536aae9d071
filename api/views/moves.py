"""Where a node can move: /v1/api/nodes/{id}/move-places.

The places come from the move's own rule (``selectors.node_move_places``), so ``POST
/nodes/{id}/move`` takes every place listed and refuses every other; a program picks one instead of
trying parents until one is accepted.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.views.documents import ERRORS
from documents import selectors


class MovePlaceSerializer(serializers.Serializer):
    # The name clashes with Field.parent for mypy only (as MoveSerializer.parent in api.views.edits).
    parent = serializers.IntegerField(help_text="the id of the parent it would move under")  # type: ignore[assignment]
    position = serializers.IntegerField(help_text="its place among that parent's other children (0 = first)")
    after = serializers.IntegerField(allow_null=True, help_text="the sibling it would follow (null: first)")
    last = serializers.BooleanField(help_text="after all of that parent's other children")


class MovePlacesSerializer(serializers.Serializer):
    node = serializers.IntegerField()
    tree_version = serializers.IntegerField(help_text="the version these places hold for")
    places = MovePlaceSerializer(many=True, help_text="in outline order; empty for the root")


class NodeMovePlacesView(APIView):
    @extend_schema(
        summary="Where a node can move: every place POST /nodes/{id}/move takes",
        responses={200: MovePlacesSerializer, **ERRORS},
    )
    def get(self, request: Request, pk: int) -> Response:
        node = selectors.node_get(user=request.user, pk=pk)
        places = selectors.node_move_places(document=node.document, node_id=node.pk)
        return Response(
            {
                "node": node.pk,
                "tree_version": node.document.tree_version,
                "places": [
                    {"parent": p.parent_id, "position": p.position, "after": p.after_id, "last": p.last}
                    for p in places
                ],
            }
        )
