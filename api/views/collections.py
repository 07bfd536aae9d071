"""Collections and who shares them: /v1/api/collections."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.pagination import paginate, paginated
from api.params import PAGE_PARAMETERS
from api.serializers import CollectionCreateSerializer, CollectionSerializer, CollectionWriteSerializer
from api.views.documents import ERRORS
from documents import selectors
from documents.models import Collection
from documents.presenters import collection_present
from documents.services.collections import collection_create, collection_delete, collection_update
from openfable.errors import PermissionDeniedError


def _managed(request: Request, pk: str) -> Collection:
    collection = selectors.collection_get(user=request.user, collection=pk)
    if not selectors.collection_may_manage(user=request.user, collection=collection):
        raise PermissionDeniedError("Only the collection's owner can rename, share or delete it.")
    return collection


def _shown(request: Request, collection: Collection) -> Response:
    refreshed = (
        selectors.collection_list(user=request.user)
        .prefetch_related("members", "invitations__user")
        .get(pk=collection.pk)
    )
    return Response(collection_present(refreshed))


def _collections_shown(collections: list[Collection]) -> list[dict[str, object]]:
    return [collection_present(collection) for collection in collections]


class CollectionListView(APIView):
    @extend_schema(
        summary="Collections you own or are a member of",
        operation_id="v1_api_collections_list",
        parameters=PAGE_PARAMETERS,
        responses={200: paginated(CollectionSerializer), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        # Newest first, then by id (names repeat): a page never shifts between two reads.
        collections = (
            selectors.collection_list(user=request.user)
            .select_related("owner")
            .prefetch_related("members", "invitations__user")
            .order_by("-created", "-id")
        )
        return paginate(request, collections, _collections_shown)

    @extend_schema(
        summary="Make a collection (you own it)",
        request=CollectionCreateSerializer,
        responses={201: CollectionSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        data = CollectionCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        collection = collection_create(name=fields["name"], slug=fields.get("slug", ""), owner=request.user)
        if fields.get("members"):
            collection_update(collection=collection, members=fields["members"], by=request.user)
        response = _shown(request, collection)
        response.status_code = status.HTTP_201_CREATED
        return response


class CollectionDetailView(APIView):
    @extend_schema(summary="A collection", responses={200: CollectionSerializer, **ERRORS})
    def get(self, request: Request, pk: str) -> Response:
        return _shown(request, selectors.collection_get(user=request.user, collection=pk))

    @extend_schema(
        summary="Rename a collection or set its members (owner only)",
        request=CollectionWriteSerializer,
        responses={200: CollectionSerializer, **ERRORS},
    )
    def patch(self, request: Request, pk: str) -> Response:
        collection = _managed(request, pk)
        data = CollectionWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        collection_update(
            collection=collection, name=fields.get("name"), members=fields.get("members"), by=request.user
        )
        return _shown(request, collection)

    @extend_schema(
        summary="Delete a collection with all its documents (owner only)", responses={204: None, **ERRORS}
    )
    def delete(self, request: Request, pk: str) -> Response:
        collection_delete(collection=_managed(request, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)
