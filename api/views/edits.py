"""Tree edits: split, merge, move, group, dissolve, exclude, undo, and the document's history.

Each endpoint is one service call (documents.services.nodes) with the same validation
and messages as the web UI. Send ``expected_version`` (the ``tree_version`` you read) to be told
with a 409 when someone else changed the tree meanwhile; every answer carries the new version.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.fields import IdField, StrictBooleanField, StrictCharField, StrictIntegerField
from api.pagination import paginate, paginated
from api.params import PAGE_PARAMETERS
from api.serializers import NodeSerializer
from api.views.documents import ERRORS
from documents import selectors
from documents.models import TreeEdit
from documents.presenters import node_present
from documents.services.nodes import (
    TreeEditResult,
    edit_undo,
    node_dissolve,
    node_merge,
    node_move,
    node_split,
    nodes_group,
)


class VersionSerializer(serializers.Serializer):
    expected_version = StrictIntegerField(
        required=False, allow_null=True, help_text="the tree_version you edited from (409 if it moved on)"
    )


class SplitSerializer(VersionSerializer):
    position = StrictIntegerField(help_text="a character offset of the document inside the leaf")
    snap = StrictBooleanField(default=True, help_text="move the cut to the nearest sentence end")


class MoveSerializer(VersionSerializer):
    # DRF's metaclass moves declared fields off the class: the name clashes with Field.parent for mypy only.
    parent = IdField(help_text="the id of the new parent node")  # type: ignore[assignment]
    position = StrictIntegerField(
        required=False,
        allow_null=True,
        help_text="0 = first; empty = where the text stays in order (GET /nodes/{id}/move-places)",
    )


class GroupSerializer(VersionSerializer):
    first = IdField(help_text="the first sibling to group")
    last = IdField(help_text="the last sibling to group")
    title = StrictCharField(blank=False)
    summary = StrictCharField(required=False, default="")


class EditResultSerializer(serializers.Serializer):
    edit = serializers.IntegerField(allow_null=True, help_text="the history entry")
    node = NodeSerializer(allow_null=True)
    tree_version = serializers.IntegerField()
    reembedding = serializers.ListField(child=serializers.IntegerField())
    created = serializers.ListField(child=serializers.IntegerField())


class TreeEditSerializer(serializers.ModelSerializer):
    # null: an edit not undone (undone_by), or by a user since deleted.
    user = serializers.CharField(source="user.username", default=None, read_only=True, allow_null=True)
    undone_by = serializers.CharField(
        source="undone_by.username", default=None, read_only=True, allow_null=True
    )

    class Meta:
        model = TreeEdit
        fields = [
            "id",
            "operation",
            "arguments",
            "user",
            "created",
            "tree_version",
            "undone",
            "undone_at",
            "undone_by",
        ]


def _answer(request: Request, result: TreeEditResult) -> Response:
    node = selectors.node_get(user=request.user, pk=result.node.pk) if result.node is not None else None
    return Response(
        {
            "edit": result.edit.pk if result.edit is not None else None,
            "node": node_present(node) if node is not None else None,
            "tree_version": result.tree_version,
            "reembedding": result.reembedding,
            "created": result.created,
        }
    )


def _valid(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    data = serializer_class(data=request.data)
    data.is_valid(raise_exception=True)
    return dict(data.validated_data)


RESPONSES: dict[int, Any] = {200: EditResultSerializer, **ERRORS, 409: ERRORS[400]}


class NodeSplitView(APIView):
    @extend_schema(summary="Split a leaf in two at a position", request=SplitSerializer, responses=RESPONSES)
    def post(self, request: Request, pk: int) -> Response:
        fields = _valid(SplitSerializer, request)
        node = selectors.node_get(user=request.user, pk=pk)
        return _answer(request, node_split(node=node, user=request.user, **fields))


class NodeMergeView(APIView):
    @extend_schema(
        summary="Merge a leaf with its next sibling leaf", request=VersionSerializer, responses=RESPONSES
    )
    def post(self, request: Request, pk: int) -> Response:
        fields = _valid(VersionSerializer, request)
        return _answer(
            request,
            node_merge(node=selectors.node_get(user=request.user, pk=pk), user=request.user, **fields),
        )


class NodeMoveView(APIView):
    @extend_schema(
        summary="Move a node with its subtree under another parent, or among its siblings",
        request=MoveSerializer,
        responses=RESPONSES,
    )
    def post(self, request: Request, pk: int) -> Response:
        fields = _valid(MoveSerializer, request)
        node = selectors.node_get(user=request.user, pk=pk)
        parent = selectors.node_get(user=request.user, pk=fields.pop("parent"))
        return _answer(request, node_move(node=node, parent=parent, user=request.user, **fields))


class NodeDissolveView(APIView):
    @extend_schema(
        summary="Dissolve a section: its children move up", request=VersionSerializer, responses=RESPONSES
    )
    def post(self, request: Request, pk: int) -> Response:
        fields = _valid(VersionSerializer, request)
        node = selectors.node_get(user=request.user, pk=pk)
        return _answer(request, node_dissolve(node=node, user=request.user, **fields))


class DocumentGroupView(APIView):
    @extend_schema(
        summary="Group consecutive siblings into a new section", request=GroupSerializer, responses=RESPONSES
    )
    def post(self, request: Request, pk: int) -> Response:
        fields = _valid(GroupSerializer, request)
        document = selectors.document_get(user=request.user, pk=pk)
        first = selectors.node_get(user=request.user, pk=fields.pop("first"), document=document)
        last = selectors.node_get(user=request.user, pk=fields.pop("last"), document=document)
        return _answer(request, nodes_group(first=first, last=last, user=request.user, **fields))


class DocumentUndoView(APIView):
    @extend_schema(
        summary="Undo the document's latest tree edit", request=VersionSerializer, responses=RESPONSES
    )
    def post(self, request: Request, pk: int) -> Response:
        fields = _valid(VersionSerializer, request)
        document = selectors.document_get(user=request.user, pk=pk)
        return _answer(request, edit_undo(document=document, user=request.user, **fields))


class DocumentHistoryView(APIView):
    @extend_schema(
        summary="The document's tree edits since it was indexed, newest first",
        operation_id="v1_api_documents_history_list",
        parameters=PAGE_PARAMETERS,
        responses={200: paginated(TreeEditSerializer), **ERRORS},
    )
    def get(self, request: Request, pk: int) -> Response:
        document = selectors.document_get(user=request.user, pk=pk)
        return paginate(request, selectors.document_history(document=document), TreeEditSerializer)
