"""Collections offered to you: /v1/api/invitations (accept with POST, decline with DELETE)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.serializers import CollectionSerializer, InvitationSerializer
from api.views.documents import ERRORS
from documents import selectors
from documents.presenters import collection_present
from documents.services.sharing import invitation_accept, invitation_decline


class InvitationListView(APIView):
    @extend_schema(
        summary="Collections offered to you, not accepted yet (not in your queries until you accept)",
        responses={200: InvitationSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        return Response(InvitationSerializer(selectors.invitations_for(user=request.user), many=True).data)


class InvitationDetailView(APIView):
    @extend_schema(
        summary="Accept: the collection is shared with you from now on",
        request=None,
        responses={200: CollectionSerializer, **ERRORS},
    )
    def post(self, request: Request, pk: int) -> Response:
        collection = invitation_accept(invitation_id=pk, user=request.user)
        shown = selectors.collection_list(user=request.user).prefetch_related("members").get(pk=collection.pk)
        return Response(collection_present(shown))

    @extend_schema(summary="Decline", responses={204: None, **ERRORS})
    def delete(self, request: Request, pk: int) -> Response:
        invitation_decline(invitation_id=pk, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
