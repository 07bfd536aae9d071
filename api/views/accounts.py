"""API tokens (/v1/api/tokens) and the health checks (/v1/api/health, /v1/api/health/live)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.serializers import (
    ErrorSerializer,
    HealthSerializer,
    LivenessSerializer,
    TokenCreatedSerializer,
    TokenCreateSerializer,
    TokenSerializer,
)
from api.views.documents import ERRORS
from openfable.api_tokens import token_create, token_revoke, tokens_of
from openfable.errors import NotFoundError, PermissionDeniedError
from openfable.health import health
from openfable.models import ApiToken

# A token that could make tokens would let whoever holds it keep access after it is revoked
# (or after the password changes): keys are made by a signed-in person, never by a program.
TOKENS_NEED_A_SESSION = (
    "An API token cannot make tokens: one made this way would keep working after this one is revoked. "
    "Sign in and make it on the API tokens page (/accounts/tokens/) or in the admin."
)


class TokenListView(APIView):
    @extend_schema(
        summary="Your API tokens (never their keys)", responses={200: TokenSerializer(many=True), **ERRORS}
    )
    def get(self, request: Request) -> Response:
        return Response(TokenSerializer(tokens_of(user=request.user), many=True).data)

    @extend_schema(
        summary="Make a token; its key is in this answer only",
        request=TokenCreateSerializer,
        responses={
            201: TokenCreatedSerializer,
            403: OpenApiResponse(ErrorSerializer, description="sent with an API token: sign in to make one"),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        if isinstance(request.auth, ApiToken):
            raise PermissionDeniedError(TOKENS_NEED_A_SESSION, code="session_required")
        data = TokenCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        token, key = token_create(user=request.user, name=data.validated_data["name"])
        body = {**TokenSerializer(token).data, "key": key}
        # The key is in this answer only: no cache on the way may keep a copy.
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})


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
        """The readiness probe: 503 while a part the app needs is away (``openfable.health``)."""
        report = health()
        return Response(
            report.to_dict(), status=status.HTTP_200_OK if report.ok else status.HTTP_503_SERVICE_UNAVAILABLE
        )


class LivenessView(APIView):
    """The liveness probe of a web process: it answers, so it is alive. It asks nothing of the
    database, the broker or a worker: a database restart must take the web servers out of
    rotation (the readiness probe, /v1/api/health), never restart them."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes: list[type] = []

    @extend_schema(
        summary="This web process answers (no auth; touches no other part)",
        responses={200: LivenessSerializer},
    )
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})
