"""Documents, their jobs and trees: /v1/api/documents, /v1/api/jobs."""

from __future__ import annotations

from datetime import UTC, datetime, time
from typing import Any

from django.conf import settings
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.fields import NO_NUL_OR_EMPTY
from api.pagination import paginate, paginated
from api.params import PAGE_PARAMETERS, flag_parameter, query_choice, query_flag
from api.parsers import JSONParser
from api.serializers import (
    DocumentCreatedSerializer,
    DocumentCreateSerializer,
    DocumentMetaSerializer,
    DocumentSerializer,
    DocumentUpdateSerializer,
    DocumentUploadSerializer,
    ErrorSerializer,
    JobSerializer,
    ReindexSerializer,
    TreeNodeSerializer,
)
from documents import selectors
from documents.files import ORIGINAL_MEDIA_TYPES, original_response
from documents.models import Document
from documents.presenters import document_present, job_present, tree_present
from documents.services.document_input import DocumentInputError
from documents.services.documents import (
    DocumentCreateResult,
    document_create,
    document_delete,
    document_reindex,
    document_update,
)
from documents.services.job_queue import job_wait

ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="input to fix; the message says what"),
    401: OpenApiResponse(ErrorSerializer, description="no or unknown token"),
    404: OpenApiResponse(ErrorSerializer, description="no such thing, or not yours to see"),
}
# A query parameter's text: PostgreSQL text cannot hold NUL, so the filters refuse it (a 400).
TEXT = {"type": "string", "pattern": NO_NUL_OR_EMPTY}
WAIT = flag_parameter("wait", "wait until indexed (bounded by OPENFABLE_API_WAIT_SECONDS): 201")


def document_shown(document: Document, **options: Any) -> dict[str, Any]:
    """The document every surface returns, with the REST API's own link to its file."""
    return document_present(document, **options) | {
        "original": reverse("api:document-original", args=[document.pk])
    }


def _documents_shown(documents: list[Document]) -> list[dict[str, Any]]:
    return [document_shown(document) for document in documents]


def _created_response(request: Request, result: DocumentCreateResult, *, wait: bool) -> Response:
    job = result.job
    code: int = status.HTTP_202_ACCEPTED if job is not None else status.HTTP_200_OK
    if job is not None and wait:
        job = job_wait(job=job, timeout=settings.API_WAIT_SECONDS)
        if job.status != job.Status.QUEUED and job.status != job.Status.RUNNING:
            code = status.HTTP_201_CREATED
    document = selectors.document_get(user=request.user, pk=result.document.pk)
    body = {
        # The original OpenFable API's answer (document_id, content_hash), beside ours.
        "document_id": document.pk,
        "content_hash": document.content_hash,
        "document": document_shown(document),
        "job": job_present(job) if job is not None else None,
        "created": result.created,
    }
    return Response(body, status=code)


class DocumentListView(APIView):
    parser_classes = [JSONParser, MultiPartParser]

    @extend_schema(
        summary="List documents",
        operation_id="v1_api_documents_list",
        parameters=[
            OpenApiParameter("collection", TEXT, description="slug or id"),
            OpenApiParameter("tag", TEXT),
            OpenApiParameter("status", str, enum=Document.Status.values),
            OpenApiParameter("search", TEXT, description="in titles and file names"),
            OpenApiParameter("created_after", OpenApiTypes.DATETIME),
            OpenApiParameter("created_before", OpenApiTypes.DATETIME),
            *PAGE_PARAMETERS,
        ],
        responses={200: paginated(DocumentMetaSerializer), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        documents = selectors.document_list(
            user=request.user,
            collection=params.get("collection") or None,
            status=query_choice(request, "status", Document.Status.values),
            tag=params.get("tag") or None,
            search=params.get("search") or None,
            created_after=_moment(params.get("created_after"), "created_after"),
            created_before=_moment(params.get("created_before"), "created_before"),
        )
        # Newest first, then by id: a page never shifts between two reads of the same list.
        return paginate(request, documents.order_by("-created", "-id"), _documents_shown)

    @extend_schema(
        summary="Add a document (JSON `text`, or a multipart `file`)",
        request={
            "application/json": DocumentCreateSerializer,
            "multipart/form-data": DocumentUploadSerializer,
        },
        parameters=[WAIT],
        responses={
            202: OpenApiResponse(DocumentCreatedSerializer, description="stored and queued"),
            201: OpenApiResponse(DocumentCreatedSerializer, description="indexed (?wait=true)"),
            200: OpenApiResponse(DocumentCreatedSerializer, description="the same text was already there"),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        wait = query_flag(request, "wait")  # read first: a bad value must not leave a document behind
        uploading = (request.content_type or "").startswith("multipart/")
        data = (DocumentUploadSerializer if uploading else DocumentCreateSerializer)(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        upload = fields.get("file")
        result = document_create(
            collection=fields.get("collection") or None,
            content=upload.read() if upload is not None else fields["text"],
            source_filename=upload.name if upload is not None else "",
            title=fields.get("title", ""),
            tags=fields.get("tags"),
            metadata=fields.get("metadata"),
            builder=fields.get("builder", ""),
            user=request.user,
        )
        return _created_response(request, result, wait=wait)


class DocumentDetailView(APIView):
    @extend_schema(
        summary="A document",
        parameters=[flag_parameter("meta_only", "omit the text")],
        responses={200: DocumentSerializer, **ERRORS},
    )
    def get(self, request: Request, pk: int) -> Response:
        document = selectors.document_get(user=request.user, pk=pk)
        content = not query_flag(request, "meta_only")
        return Response(document_shown(document, content=content, latest_job=True))

    @extend_schema(
        summary="Change a document's title, tags or metadata",
        request=DocumentUpdateSerializer,
        responses={200: DocumentMetaSerializer, **ERRORS},
    )
    def patch(self, request: Request, pk: int) -> Response:
        document = selectors.document_get(user=request.user, pk=pk)
        data = DocumentUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        document_update(document=document, **data.validated_data)
        return Response(document_shown(selectors.document_get(user=request.user, pk=pk)))

    @extend_schema(summary="Delete a document with its tree", responses={204: None, **ERRORS})
    def delete(self, request: Request, pk: int) -> Response:
        document_delete(document=selectors.document_get(user=request.user, pk=pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DocumentOriginalView(APIView):
    @extend_schema(
        summary="The document's file as uploaded (a text sent as text: that text, as a file)",
        # application/octet-stream first: a generated client reads the first media type it knows,
        # and would read text/plain (or text/html) as text where every original is bytes.
        responses={
            **{
                (200, media_type): OpenApiResponse(
                    OpenApiTypes.BINARY,
                    description="the file, as an attachment; Content-Type names its format",
                )
                for media_type in ("application/octet-stream", *ORIGINAL_MEDIA_TYPES)
            },
            **ERRORS,
        },
    )
    def get(self, request: Request, pk: int) -> HttpResponseBase:
        return original_response(selectors.document_get(user=request.user, pk=pk))


class DocumentReindexView(APIView):
    @extend_schema(
        summary="Index a document again (its current tree serves queries until the new one is saved)",
        request=ReindexSerializer,
        parameters=[WAIT],
        responses={202: DocumentCreatedSerializer, 201: DocumentCreatedSerializer, **ERRORS},
    )
    def post(self, request: Request, pk: int) -> Response:
        document = selectors.document_get(user=request.user, pk=pk)
        wait = query_flag(request, "wait")
        data = ReindexSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = document_reindex(document=document, builder=data.validated_data.get("builder", ""))
        return _created_response(
            request, DocumentCreateResult(document=document, job=job, created=False), wait=wait
        )


class DocumentTreeView(APIView):
    @extend_schema(
        summary="A document's tree: nested from the root, or ?flat=true with parent ids",
        parameters=[flag_parameter("flat", "a flat list with parent ids")],
        responses={200: TreeNodeSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, pk: int) -> Response:
        document = selectors.document_get(user=request.user, pk=pk)
        # The tree's nodes alone: the /v1 answer (the other surfaces wrap them in tree_present).
        return Response(tree_present(document, flat=query_flag(request, "flat"))["nodes"])


class JobDetailView(APIView):
    @extend_schema(
        summary="An ingestion job: status, stage, progress, error", responses={200: JobSerializer, **ERRORS}
    )
    def get(self, request: Request, pk: int) -> Response:
        return Response(job_present(selectors.job_get(user=request.user, pk=pk)))


def _moment(value: str | None, name: str) -> Any:
    if value is None:
        return None  # absent; an empty value is refused below, as the schema's date-time says
    refusal = DocumentInputError(
        f"{name}: {value!r} is not a date (2026-11-30) or a date and time (ISO 8601)."
    )
    try:
        moment = parse_datetime(value)
        if moment is None and (day := parse_date(value)) is not None:
            moment = datetime.combine(day, time.min)
    except ValueError:  # well formed but impossible: 2026-13-45, an offset of 24 hours
        raise refusal from None
    if moment is None:
        raise refusal
    # A moment without a zone is read in the server's zone (UTC unless configured).
    moment = moment if timezone.is_aware(moment) else timezone.make_aware(moment)
    try:
        # In UTC: PostgreSQL refuses the offsets beyond ±15:59 that Python accepts (to ±23:59).
        return moment.astimezone(UTC)
    except OverflowError:
        raise DocumentInputError(f"{name}: {value!r} falls outside the years 1 to 9999 in UTC.") from None
