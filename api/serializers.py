"""What the REST API reads and writes. Input serializers check shapes only (types, required
fields); the rules (size limit, UTF-8, budgets, visibility) are the services', so every surface
refuses the same input with the same words."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from documents.models import Collection, Document, IngestionJob, Node
from documents.selectors import collection_invited
from openfable.models import ApiToken

# -- collections ---------------------------------------------------------------------------------


class CollectionSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="owner.username", read_only=True, default=None)
    members = serializers.SerializerMethodField()
    invited = serializers.SerializerMethodField(
        help_text="usernames invited who have not accepted yet: it is not shared with them until they do"
    )
    document_count = serializers.IntegerField(read_only=True, default=None)

    class Meta:
        model = Collection
        fields = ["id", "name", "slug", "owner", "members", "invited", "document_count", "created"]

    def get_members(self, collection: Collection) -> list[str]:
        return [member.username for member in collection.members.all()]

    def get_invited(self, collection: Collection) -> list[str]:
        return collection_invited(collection=collection)


class InvitationSerializer(serializers.Serializer):
    """A collection someone offers to share with you (``documents.services.sharing``)."""

    id = serializers.IntegerField()
    collection = serializers.CharField(source="collection.slug", help_text="its slug")
    collection_name = serializers.CharField(source="collection.name")
    invited_by = serializers.CharField(source="invited_by.username", default=None, allow_null=True)
    created = serializers.DateTimeField()


class CollectionWriteSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    slug = serializers.CharField(max_length=200, required=False, allow_blank=True)
    members = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="usernames who may read and change it"
    )


# -- jobs and documents --------------------------------------------------------------------------


class JobSerializer(serializers.ModelSerializer):
    class Meta:
        model = IngestionJob
        fields = [
            "id",
            "document",
            "status",
            "stage",
            "progress",
            "builder_requested",
            "reindex",
            "chunk_count",
            "node_count",
            "llm_calls",
            "llm_cached_calls",
            "llm_prompt_tokens",
            "llm_completion_tokens",
            "llm_cost_usd",
            "fallback_reason",
            "error",
            "timings",
            "created",
            "started",
            "finished",
        ]


class DocumentSerializer(serializers.ModelSerializer):
    document_id = serializers.IntegerField(source="pk", read_only=True, help_text="the same as id")
    collection = serializers.CharField(source="collection.slug", read_only=True)
    node_count = serializers.IntegerField(read_only=True, default=None)
    content = serializers.CharField(read_only=True, help_text="the whole text (omitted with ?meta_only=true)")

    class Meta:
        model = Document
        fields = [
            "id",
            "document_id",
            "title",
            "collection",
            "status",
            "builder",
            "token_count",
            "node_count",
            "tags",
            "metadata",
            "source_filename",
            "content_hash",
            "embedding_model",
            "tree_version",
            "created",
            "updated",
            "content",
        ]

    def to_representation(self, instance: Document) -> dict[str, Any]:
        data = super().to_representation(instance)
        if self.context.get("meta_only"):
            data.pop("content", None)
        return data


class DocumentMetaSerializer(DocumentSerializer):
    """A document without its text (lists)."""

    class Meta(DocumentSerializer.Meta):
        fields = [field for field in DocumentSerializer.Meta.fields if field != "content"]


class DocumentCreateSerializer(serializers.Serializer):
    text = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text="the document's text (UTF-8)"
    )
    file = serializers.FileField(required=False, help_text="a .txt or .md file instead of text (multipart)")
    title = serializers.CharField(required=False, allow_blank=True, default="")
    collection = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="slug or id (default: your own)"
    )
    tags = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False
    )
    metadata = serializers.JSONField(required=False)
    builder = serializers.ChoiceField(choices=["", "llm", "structural"], required=False, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "text" not in attrs and "file" not in attrs:
            raise serializers.ValidationError(
                {"text": "Send the document as `text`, or upload it as `file`."}
            )
        if "text" in attrs and "file" in attrs:
            raise serializers.ValidationError({"file": "Send either `text` or `file`, not both."})
        upload = attrs.get("file")
        if upload is not None and upload.size > settings.MAX_DOCUMENT_BYTES:
            # Refused from its declared size, before the whole file is read.
            raise serializers.ValidationError(
                {
                    "file": f"The file is {upload.size:,} bytes; the limit is {settings.MAX_DOCUMENT_BYTES:,} "
                    "(OPENFABLE_MAX_DOCUMENT_BYTES). Split it into smaller documents."
                }
            )
        return attrs


class DocumentUpdateSerializer(serializers.Serializer):
    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    tags = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    metadata = serializers.JSONField(required=False)


class DocumentCreatedSerializer(serializers.Serializer):
    """202 (queued) or 201 (indexed, with ?wait=true): the document and its job."""

    document = DocumentMetaSerializer()
    job = JobSerializer(allow_null=True)
    created = serializers.BooleanField(help_text="false when the same text was already in the collection")


class ReindexSerializer(serializers.Serializer):
    builder = serializers.ChoiceField(choices=["", "llm", "structural"], required=False, default="")


# -- nodes and trees -----------------------------------------------------------------------------

NODE_FIELDS = [
    "id",
    "document",
    "parent",
    "kind",
    "depth",
    "ordinal",
    "order",
    "title",
    "summary",
    "toc_path",
    "start_char",
    "end_char",
    "token_count",
    "edited",
    "embedding_stale",
    "excluded",
]


class NodeSerializer(serializers.ModelSerializer):
    content = serializers.SerializerMethodField(
        help_text="the node's exact text: the document's [start, end) slice"
    )

    class Meta:
        model = Node
        fields = [*NODE_FIELDS, "content"]

    def get_content(self, node: Node) -> str:
        return node.document.content[node.start_char : node.end_char]


class NodeUpdateSerializer(serializers.Serializer):
    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    summary = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    excluded = serializers.BooleanField(required=False, help_text="leave it and its subtree out of retrieval")
    expected_version = serializers.IntegerField(required=False, allow_null=True)


class TreeNodeSerializer(serializers.Serializer):
    """A node of ``GET /documents/{id}/tree`` (nested: with ``children``; flat: with ``parent``)."""

    id = serializers.IntegerField()
    # DRF's metaclass moves declared fields off the class: the name clashes with Field.parent for mypy only.
    parent = serializers.IntegerField(allow_null=True)  # type: ignore[assignment]
    kind = serializers.CharField()
    depth = serializers.IntegerField()
    title = serializers.CharField()
    summary = serializers.CharField()
    toc_path = serializers.CharField()
    start_char = serializers.IntegerField()
    end_char = serializers.IntegerField()
    token_count = serializers.IntegerField()
    edited = serializers.BooleanField()
    children = serializers.ListField(child=serializers.DictField(), required=False)


# -- query ---------------------------------------------------------------------------------------


class QueryRequestSerializer(serializers.Serializer):
    query = serializers.CharField(trim_whitespace=False, allow_blank=True)
    token_budget = serializers.IntegerField(required=False, help_text="100–32000 tokens (default 2000)")
    mode = serializers.ChoiceField(choices=["bipath", "vector", "llm"], required=False, allow_null=True)
    collection = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    documents = serializers.ListField(child=serializers.IntegerField(), required=False, allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(), required=False, allow_null=True)


class QueryDocumentSerializer(serializers.Serializer):
    document_id = serializers.IntegerField()
    title = serializers.CharField()
    score = serializers.FloatField()
    token_count = serializers.IntegerField()
    content = serializers.CharField(
        allow_null=True, help_text="the whole text when routing is document_level"
    )


class QueryChunkSerializer(serializers.Serializer):
    node_id = serializers.IntegerField(allow_null=True)
    document_id = serializers.IntegerField()
    content = serializers.CharField()
    token_count = serializers.IntegerField()
    score = serializers.FloatField()
    position = serializers.IntegerField(help_text="place in the returned context, in document order")
    source = serializers.CharField(help_text="the path that found it")  # type: ignore[assignment]  # as parent above


class QueryResponseSerializer(serializers.Serializer):
    """The original OpenFable fields, and this engine's full result beside them (``result``)."""

    query = serializers.CharField()
    routing = serializers.ChoiceField(choices=["document_level", "node_level"])
    total_tokens = serializers.IntegerField()
    documents = QueryDocumentSerializer(many=True)
    chunks = QueryChunkSerializer(many=True)
    result = serializers.DictField(help_text="retrieve()'s whole result: paths, scores, timings, cache")


# -- tokens and health ---------------------------------------------------------------------------


class TokenSerializer(serializers.ModelSerializer):
    active = serializers.BooleanField(read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created", "last_used", "revoked", "active"]


class TokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)


class TokenCreatedSerializer(TokenSerializer):
    key = serializers.CharField(read_only=True, help_text="shown this once; only its hash is stored")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "key"]


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "unavailable"])
    failed = serializers.ListField(child=serializers.CharField())
    checks = serializers.DictField()


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.JSONField()


class ErrorSerializer(serializers.Serializer):
    """Every error the API answers: ``{"error": {"code", "message", "details"}}``."""

    error = ErrorBodySerializer()
