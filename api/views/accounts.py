"""API tokens (/v1/api/tokens) and the health check (/v1/api/health)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.serializers import HealthSerializer, TokenCreatedSerializer, TokenCreateSerializer, TokenSerializer
from api.views.documents import ERRORS
from openfable.api_tokens import token_create, token_revoke, tokens_of
from openfable.errors import NotFoundError
from openfable.health import health


class TokenListView(APIView):
    @extend_schema(
        summary="Your API tokens (never their keys)", responses={200: TokenSerializer(many=True), **ERRORS}
    )
    def get(self, request: Request) -> Response:
        return Response(TokenSerializer(tokens_of(user=request.user), many=True).data)

    @extend_schema(
        summary="Make a token; its key is in this answer only",
        request=TokenCreateSerializer,
        responses={201: TokenCreatedSerializer, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        data = TokenCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        token, key = token_create(user=request.user, name=data.validated_data["name"])
        body = {**TokenSerializer(token).data, "key": key}
        return Response(body, status=status.HTTP_201_CREATED)


class TokenDetailView(APIView):
    @extend_schema(summary="Revoke a token: it stops working at once", responses={204: None, **ERRORS})
    def delete(self, request: Request, pk: int) -> Response:
        token = tokens_of(user=request.user).filter(pk=pk).first()
        if token is None:
            raise NotFoundError(f"You have no token {pk}.")
        token_revoke(token=token)
        return Response(status=status.HTTP_204_NO_CONTENT)


class HealthView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes: list[type] = []

    @extend_schema(
        summary="Database, pgvector, broker, a live worker, embeddings, LLM (no auth)",
        responses={
            200: HealthSerializer,
            503: OpenApiResponse(HealthSerializer, description="a part failed"),
        },
    )
    def get(self, request: Request) -> Response:
        report = health()
        return Response(
            report.to_dict(), status=status.HTTP_200_OK if report.ok else status.HTTP_503_SERVICE_UNAVAILABLE
        )
