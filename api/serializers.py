"""What the REST API reads and writes. Input serializers check shapes only (types, required
fields); the rules (size limit, UTF-8, budgets, visibility) are the services', so every surface
refuses the same input with the same words.

Output is not rendered here: a collection, document, node, job and query result are the shapes
every surface returns (``documents.presenters``, ``RetrievalResult.to_answer``). The output
serializers below declare those shapes for the OpenAPI schema only; ``tests/api/test_schema.py``
and ``tests/documents/test_presenters.py`` hold them to what the presenters answer."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from api.fields import (
    IdField,
    MetadataField,
    ServiceRangeIntegerField,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
)
from documents.models import Collection, Document, IngestionJob, Node
from documents.services.collections import slug_check
from documents.services.document_input import TAG_MAX_CHARS, TAGS_MAX_COUNT, TITLE_MAX_CHARS
from openfable.models import ApiToken
from retrieval.query_input import MAX_TOP_K
from retrieval.result import ORDERS
from retrieval.services import MAX_QUERY_CHARS

# -- collections ---------------------------------------------------------------------------------


class CollectionSerializer(serializers.ModelSerializer):
    """``documents.presenters.collection_present``."""

    owner = serializers.CharField(read_only=True, allow_null=True, help_text="null: no owner")
    members = serializers.ListField(child=serializers.CharField(), read_only=True, help_text="usernames")
    invited = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="usernames invited who have not accepted yet: it is not shared with them until they do",
    )
    document_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Collection
        fields = ["id", "name", "slug", "owner", "members", "invited", "document_count", "created"]


class InvitationSerializer(serializers.Serializer):
    """A collection someone offers to share with you (``documents.services.sharing``)."""

    id = serializers.IntegerField()
    collection = serializers.CharField(source="collection.slug", help_text="its slug")
    collection_name = serializers.CharField(source="collection.name")
    invited_by = serializers.CharField(source="invited_by.username", default=None, allow_null=True)
    created = serializers.DateTimeField()


# The slugs ``collection_slug_clean`` takes, for the schema: what Django's slugify() leaves as it
# is (lowercase ASCII letters, digits, "_", single "-" between, neither at an end), not all digits
# (it would read as an id), not a default collection's ("default", "default-12"); empty makes one
# from the name (a blank field: its own branch in the schema). tests/api/test_schema.py checks
# this against the service.
SLUG_PATTERN = r"^(?!\d+$)(?!default(?:-\d+)*$)(?!_)(?!.*_$)[a-z0-9_]+(?:-[a-z0-9_]+)*$"


class _SlugRule(RegexValidator):
    """The pattern for the schema; the service's rule, in its words, for the check itself."""

    def __call__(self, value: Any) -> None:
        slug_check(value)  # its DocumentInputError is the answer, in the words of every other surface


class CollectionWriteSerializer(serializers.Serializer):
    name = StrictCharField(blank=False, max_length=200, required=False)
    slug = StrictCharField(
        max_length=200,
        required=False,
        validators=[_SlugRule(SLUG_PATTERN)],
        help_text="lowercase letters, digits, '_' and single '-' between them; not all digits, not "
        "default or default-<n>; empty: made from the name",
    )
    members = serializers.ListField(
        child=StrictCharField(), required=False, help_text="usernames who may read and change it"
    )


class CollectionCreateSerializer(CollectionWriteSerializer):
    name = StrictCharField(blank=False, max_length=200)


# -- jobs and documents --------------------------------------------------------------------------


class JobStepSerializer(serializers.Serializer):
    """The current stage as the corpus page says it (``documents.progress_words``)."""

    words = serializers.CharField(
        help_text='e.g. "Embedding 120 of 156 passages", "Waiting to start", "Done"'
    )
    done = serializers.IntegerField(help_text="items of the current stage done")
    total = serializers.IntegerField(help_text="items in the current stage (0: it reports only a fraction)")
    queue_ahead = serializers.IntegerField(
        allow_null=True, help_text="while queued: unfinished jobs before it in the one queue; else null"
    )
    queue = serializers.CharField(help_text='e.g. "2 documents ahead", "next in line"; "" once it runs')
    seconds_left = serializers.IntegerField(
        allow_null=True,
        help_text="the current stage's time left at its measured rate; null until there is a rate",
    )
    time_left = serializers.CharField(help_text='e.g. "about 3 minutes left"; "" until there is a rate')


class JobSerializer(serializers.ModelSerializer):
    """``documents.presenters.job_present``."""

    progress = serializers.IntegerField(help_text="percent of the whole build")
    step = JobStepSerializer()
    llm_cost_usd = serializers.FloatField()
    finished = serializers.DateTimeField(
        allow_null=True, help_text="when it succeeded or failed; null until then"
    )

    class Meta:
        model = IngestionJob
        fields = [
            "id",
            "document",
            "status",
            "stage",
            "progress",
            "step",
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
            "document_tokens",
            "embedded_tokens",
            "created",
            "started",
            "finished",
        ]


class DocumentSerializer(serializers.ModelSerializer):
    """``documents.presenters.document_present`` with its text and latest job, and the REST API's
    own link, ``original``."""

    document_id = serializers.IntegerField(read_only=True, help_text="the same as id")
    collection = serializers.CharField(read_only=True, help_text="its slug")
    node_count = serializers.IntegerField(read_only=True)
    tags = serializers.ListField(child=serializers.CharField(), read_only=True)
    metadata = serializers.DictField(read_only=True)
    page_count = serializers.IntegerField(read_only=True, help_text="pages of the uploaded file (0: a text)")
    recognised_pages = serializers.ListField(
        child=serializers.IntegerField(),
        read_only=True,
        help_text="pages (1-based) whose text was recognised from the page image by OCR",
    )
    ocr_note = serializers.CharField(
        read_only=True, help_text="a sentence saying which pages were read by OCR; empty when none were"
    )
    original = serializers.CharField(
        read_only=True, help_text="where to download the file as uploaded (a text: the text as a file)"
    )
    latest_job = JobSerializer(read_only=True, allow_null=True, help_text="its newest ingestion job")
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
            "format",
            "format_note",
            "page_count",
            "recognised_pages",
            "ocr_note",
            "original",
            "content_hash",
            "embedding_model",
            "tree_version",
            "created",
            "updated",
            "latest_job",
            "content",
        ]


class DocumentMetaSerializer(DocumentSerializer):
    """A document without its text and job (lists, and beside its job in an answer)."""

    class Meta(DocumentSerializer.Meta):
        fields = [field for field in DocumentSerializer.Meta.fields if field not in ("content", "latest_job")]


def _builder_field() -> serializers.ChoiceField:
    # "" (the default builder) as the blank value, not a choice: as a choice too, the schema's
    # oneOf of the choices and the blank would match it twice, and so refuse it.
    return serializers.ChoiceField(
        choices=["llm", "structural"],
        allow_blank=True,
        required=False,
        default="",
        help_text="empty: the default",
    )


def _tags_field(*, too_many: str = "Keep the ones you filter by.", **kwargs: Any) -> serializers.ListField:
    # The counts the services keep (documents.services.document_input.clean_tags), for the schema.
    return serializers.ListField(
        child=StrictCharField(
            max_length=TAG_MAX_CHARS,
            error_messages={
                "max_length": f"A tag is longer than {TAG_MAX_CHARS} characters; tags hold at most "
                f"{TAG_MAX_CHARS}."
            },
        ),
        max_length=TAGS_MAX_COUNT,
        error_messages={
            "max_length": f"Too many tags; a document carries at most {TAGS_MAX_COUNT}. {too_many}"
        },
        required=False,
        **kwargs,
    )


class _DocumentFieldsSerializer(serializers.Serializer):
    title = StrictCharField(required=False, default="", max_length=TITLE_MAX_CHARS)
    collection = StrictCharField(required=False, default="", help_text="slug or id (default: your own)")
    tags = _tags_field()
    metadata = MetadataField(required=False)
    builder = _builder_field()


class DocumentCreateSerializer(_DocumentFieldsSerializer):
    """A JSON body: the text itself."""

    text = StrictCharField(
        blank=False,
        blank_message="The document is empty (only whitespace). Paste or upload some text.",
        error_messages={"required": "Send the document as `text`, or upload it as `file`."},
        help_text="the document's text (UTF-8)",
    )


class DocumentUploadSerializer(_DocumentFieldsSerializer):
    """A multipart body: the text as a file (``metadata`` as JSON text)."""

    # An empty file reaches the service, which says so in the words of every surface.
    file = serializers.FileField(
        allow_empty_file=True,
        help_text="a PDF, Word (.docx), HTML, Markdown or text file; its format is read from its content",
    )

    def validate_file(self, upload: Any) -> Any:
        if upload.size > settings.MAX_FILE_BYTES:
            # Refused from its declared size, before the whole file is read.
            raise serializers.ValidationError(
                f"The file is {upload.size:,} bytes; the limit is {settings.MAX_FILE_BYTES:,} "
                "(OPENFABLE_MAX_FILE_BYTES). Split it into smaller files."
            )
        return upload


class DocumentUpdateSerializer(serializers.Serializer):
    title = StrictCharField(blank=False, required=False, max_length=TITLE_MAX_CHARS)
    tags = _tags_field()
    metadata = MetadataField(required=False)


class DocumentCreatedSerializer(serializers.Serializer):
    """202 (queued) or 201 (indexed, with ?wait=true): the document and its job."""

    document_id = serializers.IntegerField(help_text="the document's id (as the original OpenFable API)")
    content_hash = serializers.CharField(help_text="sha256 of the text (as the original OpenFable API)")
    document = DocumentMetaSerializer()
    job = JobSerializer(allow_null=True)
    created = serializers.BooleanField(help_text="false when the same text was already in the collection")


class ReindexSerializer(serializers.Serializer):
    builder = _builder_field()


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
    """``documents.presenters.node_present``."""

    document_title = serializers.CharField(read_only=True)
    content = serializers.CharField(
        read_only=True, help_text="the node's exact text: the document's [start, end) slice"
    )
    pages = serializers.ListField(
        child=serializers.IntegerField(),
        read_only=True,
        help_text="the pages of the document's file the node lies on ([] for a text without pages)",
    )

    class Meta:
        model = Node
        fields = [*NODE_FIELDS[:2], "document_title", *NODE_FIELDS[2:], "pages", "content"]


class NodeUpdateSerializer(serializers.Serializer):
    title = StrictCharField(required=False)
    summary = StrictCharField(required=False)
    excluded = StrictBooleanField(required=False, help_text="leave it and its subtree out of retrieval")
    expected_version = StrictIntegerField(required=False, allow_null=True)


@extend_schema_field({"type": "array", "items": {"$ref": "#/components/schemas/TreeNode"}})
class _TreeChildrenField(serializers.ListField):
    """A tree node's children: tree nodes themselves (a recursive component, so that a generated
    client types every level)."""


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
    excluded = serializers.BooleanField(help_text="left out of retrieval, with its subtree")
    embedding_stale = serializers.BooleanField(help_text="edited since embedded: re-embedded by the next job")
    pages = serializers.ListField(
        child=serializers.IntegerField(), help_text="the pages of the document's file it lies on"
    )
    children = _TreeChildrenField(
        child=serializers.DictField(), required=False, help_text="nested only: its children, in order"
    )


# -- query ---------------------------------------------------------------------------------------


_BUDGET_NOT_VALID = (
    f"The token budget is not valid: send a whole number of tokens, {settings.TOKEN_BUDGET_MIN}–"
    f"{settings.TOKEN_BUDGET_MAX}."
)


@extend_schema_serializer(component_name="Query")  # "QueryRequest" in the schema, not "QueryRequestRequest"
class QueryRequestSerializer(serializers.Serializer):
    query = StrictCharField(
        blank=False,
        blank_message="The query is empty. Type what you are looking for.",
        max_length=MAX_QUERY_CHARS,
        error_messages={
            "max_length": f"The query is too long; the limit is {MAX_QUERY_CHARS:,} characters. "
            "Shorten it to the question itself."
        },
    )
    token_budget = ServiceRangeIntegerField(
        required=False,
        min_value=settings.TOKEN_BUDGET_MIN,
        max_value=settings.TOKEN_BUDGET_MAX,
        error_messages={"invalid": _BUDGET_NOT_VALID},
        help_text=f"{settings.TOKEN_BUDGET_MIN}–{settings.TOKEN_BUDGET_MAX} tokens "
        f"(default {settings.TOKEN_BUDGET_DEFAULT}); not with top_k",
    )
    top_k = ServiceRangeIntegerField(
        required=False,
        min_value=1,
        max_value=MAX_TOP_K,
        help_text="instead of a budget: the best top_k passages (packed under the largest budget, "
        f"{settings.TOKEN_BUDGET_MAX} tokens, and never whole documents); not with token_budget",
    )
    order = serializers.ChoiceField(
        choices=list(ORDERS),
        required=False,
        help_text="of the chunks: document (document rank, then offset; the default) or score (best first)",
    )
    mode = serializers.ChoiceField(choices=["bipath", "vector", "llm"], required=False, allow_null=True)
    collection = StrictCharField(required=False, allow_null=True)
    documents = serializers.ListField(child=IdField(), required=False, allow_null=True)
    tags = _tags_field(too_many="Filter by fewer tags.", allow_null=True)


class QueryDocumentSerializer(serializers.Serializer):
    """A document of the answer, once however many of its chunks come back."""

    document_id = serializers.IntegerField()
    title = serializers.CharField()
    score = serializers.FloatField()
    token_count = serializers.IntegerField()
    source_filename = serializers.CharField(help_text="the uploaded file's name; empty for a text")
    format = serializers.CharField(help_text="pdf, docx, html, markdown or text")
    tags = serializers.ListField(child=serializers.CharField())
    metadata = serializers.DictField()
    original = serializers.CharField(help_text="where to download the file as uploaded")


class QueryChunkSerializer(serializers.Serializer):
    node_id = serializers.IntegerField(allow_null=True)
    document_id = serializers.IntegerField()
    document_title = serializers.CharField()
    toc_path = serializers.CharField(help_text="the section path: titles from the root, ' > ' between")
    kind = serializers.CharField(help_text="root (a whole document), section, subsection or leaf")
    start_char = serializers.IntegerField(help_text="offset into the document's text")
    end_char = serializers.IntegerField(help_text="content == the document's text[start_char:end_char]")
    content = serializers.CharField()
    token_count = serializers.IntegerField()
    score = serializers.FloatField()
    position = serializers.IntegerField(help_text="place in the returned context, in the order asked for")
    source = serializers.CharField(help_text="the path that found it")  # type: ignore[assignment]  # as parent above
    truncated = serializers.BooleanField(help_text="cut to fit the budget (only ever a single chunk)")
    pages = serializers.ListField(
        child=serializers.IntegerField(), help_text="the pages of the document's file it lies on"
    )


class PathReportSerializer(serializers.Serializer):
    """``retrieval.result.PathReport``: one retrieval path, whether it ran, and why not."""

    name = serializers.CharField()
    ran = serializers.BooleanField()
    failed = serializers.BooleanField()
    reason = serializers.CharField(help_text="why it did not run, or why it failed")
    candidates = serializers.IntegerField(help_text="documents or nodes it returned")
    dropped_ids = serializers.IntegerField(help_text="LLM paths: ids in the answer that were not offered")
    detail = serializers.DictField(help_text="e.g. the vector search strategy")


class DocumentHitSerializer(serializers.Serializer):
    """``retrieval.result.DocumentHit``: a document of the fused ranking."""

    document_id = serializers.IntegerField()
    title = serializers.CharField()
    rank = serializers.IntegerField(help_text="0: the best fused score")
    score = serializers.FloatField(help_text="fused, in [0, 1]")
    path_scores = serializers.DictField(child=serializers.FloatField(), help_text="raw score per path")
    found_by = serializers.ListField(child=serializers.CharField())
    token_count = serializers.IntegerField()
    selected = serializers.BooleanField(help_text="in the set the budget was routed on")
    vector_hits = serializers.IntegerField()


class ChunkScoresSerializer(serializers.Serializer):
    """``retrieval.result.ChunkScores``: null where a path did not score the chunk."""

    fused = serializers.FloatField()
    similarity = serializers.FloatField(allow_null=True)
    lexical = serializers.FloatField(allow_null=True)
    inherited = serializers.FloatField(allow_null=True)
    child = serializers.FloatField(allow_null=True)
    tree_expansion = serializers.FloatField(allow_null=True)
    llm = serializers.FloatField(allow_null=True)


class ChunkReportSerializer(serializers.Serializer):
    """``retrieval.result.Chunk`` without its text (in the answer's ``chunks``)."""

    node_id = serializers.IntegerField(allow_null=True)
    document_id = serializers.IntegerField()
    document_title = serializers.CharField()
    document_rank = serializers.IntegerField()
    toc_path = serializers.CharField()
    kind = serializers.CharField()
    start_char = serializers.IntegerField()
    end_char = serializers.IntegerField()
    token_count = serializers.IntegerField()
    scores = ChunkScoresSerializer()
    found_by = serializers.ListField(child=serializers.CharField())
    truncated = serializers.BooleanField()
    pages = serializers.ListField(child=serializers.IntegerField())


class LLMUsageSerializer(serializers.Serializer):
    calls = serializers.IntegerField()
    cached_calls = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField()


class RetrievalReportSerializer(serializers.Serializer):
    """``RetrievalResult.to_dict``: what the query did and why (chunk texts are in ``chunks``)."""

    query = serializers.CharField()
    token_budget = serializers.IntegerField()
    top_k = serializers.IntegerField(allow_null=True, help_text="the most passages asked for; null: a budget")
    order = serializers.ChoiceField(choices=list(ORDERS))
    mode = serializers.ChoiceField(choices=["bipath", "vector", "llm"])
    routing = serializers.ChoiceField(choices=["documents", "nodes"])
    paths_run = serializers.ListField(child=serializers.CharField())
    paths = PathReportSerializer(many=True)
    documents = DocumentHitSerializer(many=True, help_text="the fused ranking, best first")
    chunks = ChunkReportSerializer(many=True)
    total_tokens = serializers.IntegerField()
    timings_ms = serializers.DictField(child=serializers.FloatField(), help_text="stage -> milliseconds")
    llm_usage = LLMUsageSerializer()
    corpus_version = serializers.IntegerField()
    filters = serializers.DictField()
    notes = serializers.ListField(child=serializers.CharField())
    cached = serializers.BooleanField()


class QueryResponseSerializer(serializers.Serializer):
    """``RetrievalResult.to_answer``: the original OpenFable fields, and this engine's full result
    beside them (``result``); each text once, in ``chunks``."""

    query = serializers.CharField()
    routing = serializers.ChoiceField(choices=["document_level", "node_level"])
    total_tokens = serializers.IntegerField()
    token_budget = serializers.IntegerField()
    documents = QueryDocumentSerializer(
        many=True, help_text="the documents the budget was routed on: every chunk's document, once"
    )
    chunks = QueryChunkSerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField())
    result = RetrievalReportSerializer(
        help_text="retrieve()'s whole result: paths, scores, timings, cache (chunk texts are in chunks)"
    )


# -- tokens and health ---------------------------------------------------------------------------


class TokenSerializer(serializers.ModelSerializer):
    active = serializers.BooleanField(read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created", "last_used", "revoked", "active"]


class TokenCreateSerializer(serializers.Serializer):
    name = StrictCharField(blank=False, max_length=100)


class TokenCreatedSerializer(TokenSerializer):
    key = serializers.CharField(read_only=True, help_text="shown this once; only its hash is stored")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "key"]


class HealthCheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    detail = serializers.CharField()
    ms = serializers.FloatField(help_text="how long the check took")


class HealthSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "unavailable"])
    failed = serializers.ListField(child=serializers.CharField())
    checks = serializers.DictField(child=HealthCheckSerializer(), help_text="by part: database, pgvector, …")


class LivenessSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok"])


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    details = serializers.JSONField()


class ErrorSerializer(serializers.Serializer):
    """Every error the API answers: ``{"error": {"code", "message", "details"}}``."""

    error = ErrorBodySerializer()
