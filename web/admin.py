"""The admin: a staff surface like any other, so every write goes through the services.

A document added here is queued for ingestion exactly as an upload is (``document_create``,
with its messages beside the fields); a document's text and a node's offsets are read-only
(every leaf points into that text); node titles and summaries go through ``node_update``
(re-embedded, marked edited, corpus version moved); deletes go through the delete services.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from documents.files import download_name
from documents.models import Collection, Document, IngestionJob, Node
from documents.presenters import ocr_note
from documents.services.collections import (
    collection_create,
    collection_delete,
    collection_owner_set,
    collection_slug_clean,
    collection_update,
)
from documents.services.document_input import document_input_clean
from documents.services.documents import (
    document_create,
    document_delete,
    document_reindex,
    document_update,
    job_retry,
)
from documents.services.nodes import node_texts_clean, node_update
from openfable.admin_services import SavedByServiceMixin
from openfable.errors import UserInputError
from web.forms import ACCEPTED_FILES
from web.user_admin import PersonAdmin  # noqa: F401  (registers the user admin)


class _TagFilter(admin.SimpleListFilter):
    """Tags live in an ArrayField, which Django's default filters cannot list."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        tags: set[str] = set()
        for document_tags in Document.objects.values_list("tags", flat=True).distinct()[:500]:
            tags.update(document_tags)
        return [(tag, tag) for tag in sorted(tags)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(tags__contains=[value]) if value else queryset


def _tags_text(tags: list[str] | None) -> str:
    return ", ".join(tags or [])


# -- collections ----------------------------------------------------------------------------------


class CollectionForm(forms.ModelForm):
    class Meta:
        model = Collection
        fields = ["name", "slug", "owner", "members"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "slug" in self.fields:
            self.fields["slug"].required = False
            self.fields["slug"].help_text = "made from the name when left empty; fixed once made"

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.instance.pk is None and data.get("name"):
            try:
                data["slug"] = collection_slug_clean(name=data["name"], slug=data.get("slug", ""))
            except UserInputError as error:
                raise forms.ValidationError({"slug": str(error)}) from None
        return data


@admin.register(Collection)
class CollectionAdmin(SavedByServiceMixin, admin.ModelAdmin):
    form = CollectionForm
    list_display = ["name", "slug", "owner", "created"]
    search_fields = ["name", "slug"]
    filter_horizontal = ["members"]
    fields = ["name", "slug", "owner", "members"]

    def get_readonly_fields(self, request: HttpRequest, obj: Collection | None = None) -> list[str]:
        # The slug names the collection in URLs, filters and scripts: fixed once made.
        return ["slug"] if obj is not None else []

    def save_through_service(self, request: HttpRequest, form: forms.ModelForm, change: bool) -> Collection:
        data = form.cleaned_data
        if not change:
            collection = collection_create(
                name=data["name"], slug=data.get("slug", ""), owner=data.get("owner")
            )
        else:
            collection = collection_owner_set(collection=form.instance, owner=data.get("owner"))
        # The operator's admin adds members at once, trusted like its other powers (it edits any
        # document); owners elsewhere invite, and the person accepts (documents.services.sharing).
        return collection_update(
            collection=collection, name=data["name"], members=data.get("members"), members_at_once=True
        )

    def delete_model(self, request: HttpRequest, obj: Collection) -> None:
        collection_delete(collection=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Collection]) -> None:
        for collection in queryset:
            collection_delete(collection=collection)


# -- documents ------------------------------------------------------------------------------------


class _MetadataField(forms.JSONField):
    """Django's JSON form field, refusing JSON nested past Python's decoder limit in words: its
    ``RecursionError`` is no ``JSONDecodeError``, and escaped as a 500 (parsing, and again when
    the refused form is shown back)."""

    _too_deep = "The metadata is nested too deeply to read (about a thousand levels or more); flatten it."

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except RecursionError:
            raise forms.ValidationError(self._too_deep) from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        try:
            return super().bound_data(data, initial)
        except RecursionError:
            return forms.fields.InvalidJSONInput(data)


class DocumentAddForm(forms.ModelForm):
    """What a person gives to add a document; checked by the same rules as every other surface."""

    content = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 20}), strip=False, label="Text", required=False
    )
    upload = forms.FileField(
        required=False,
        label="Or a file",
        help_text="PDF, Word (.docx), HTML, Markdown or text; its format is read from its content",
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPTED_FILES}),
    )
    title = forms.CharField(required=False, help_text="from the first line when left empty")
    tags_text = forms.CharField(required=False, label="Tags", help_text="comma-separated")
    builder = forms.ChoiceField(
        required=False,
        choices=[
            ("", "default (LLM when configured, else structural)"),
            ("llm", "llm"),
            ("structural", "structural"),
        ],
    )

    class Meta:
        model = Document
        fields = ["collection", "title", "content", "metadata"]
        field_classes = {"metadata": _MetadataField}

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        content = data.get("content")
        if content is not None:
            # Browsers send line ends as CRLF; the text is stored as the person wrote it, in LF.
            data["content"] = content.replace("\r\n", "\n")
        upload = data.get("upload")
        if upload and (content or "").strip():
            raise forms.ValidationError("Give either the text or a file, not both.")
        if upload and upload.size > settings.MAX_FILE_BYTES:
            # Refused from its declared size, before it is read (as every upload form does).
            raise forms.ValidationError(
                f"{upload.name}: the file is {upload.size:,} bytes; the limit is "
                f"{settings.MAX_FILE_BYTES:,} (OPENFABLE_MAX_FILE_BYTES). Split it into smaller files."
            )
        data["file"] = (upload.read(), upload.name) if upload else None
        try:
            data["cleaned"] = document_input_clean(
                content=data["file"][0] if upload else data.get("content"),
                source_filename=upload.name if upload else "",
                title=data.get("title", ""),
                tags=data.get("tags_text", ""),
                metadata=data.get("metadata"),
                builder=data.get("builder", ""),
            )
        except UserInputError as error:
            raise forms.ValidationError(str(error)) from None
        return data


class DocumentChangeForm(forms.ModelForm):
    """An indexed document's description; its text is fixed (the tree's offsets point into it)."""

    tags_text = forms.CharField(required=False, label="Tags", help_text="comma-separated")

    class Meta:
        model = Document
        fields = ["title", "metadata"]
        field_classes = {"metadata": _MetadataField}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tags_text"].initial = _tags_text(self.instance.tags)


class IngestionJobInline(admin.TabularInline):
    model = IngestionJob
    extra = 0
    can_delete = False
    show_change_link = True
    fields = readonly_fields = (
        "status",
        "stage",
        "progress",
        "llm_calls",
        "llm_cost_usd",
        "error",
        "created",
        "finished",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class NodeInline(admin.TabularInline):
    model = Node
    extra = 0
    can_delete = False
    show_change_link = True  # titles and summaries are edited on the node's own page
    fields = readonly_fields = (
        "order",
        "kind",
        "depth",
        "title",
        "start_char",
        "end_char",
        "token_count",
        "edited",
    )
    ordering = ["order"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        return super().get_queryset(request).defer("embedding", "content", "summary")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Document)
class DocumentAdmin(SavedByServiceMixin, admin.ModelAdmin):
    list_display = ["title", "collection", "status", "builder", "token_count", "updated"]
    list_filter = ["status", "collection", "builder", _TagFilter]
    search_fields = ["title", "source_filename", "content_hash"]
    list_select_related = ["collection"]
    actions = ["reindex", "retry_failed"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        return super().get_queryset(request).defer("content")

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        kwargs["form"] = DocumentChangeForm if obj is not None else DocumentAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    # An indexed document's description can change; what ingestion made of it is shown, read-only.
    add_fields = ["collection", "title", "content", "upload", "tags_text", "metadata", "builder"]
    change_fields = ["title", "tags_text", "metadata"]
    shown_fields = [
        "collection",
        "status",
        "builder",
        "source_filename",
        "format",
        "format_note",
        "pages",
        "read_by_ocr",
        "original_file",
        "token_count",
        "content_hash",
        "embedding_model",
        "text_preview",
        "created",
        "updated",
    ]

    def get_fields(self, request: HttpRequest, obj: Document | None = None) -> list[str]:  # type: ignore[override]
        return self.add_fields if obj is None else [*self.change_fields, *self.shown_fields]

    def get_readonly_fields(self, request: HttpRequest, obj: Document | None = None) -> list[str]:
        return [] if obj is None else self.shown_fields

    def get_inlines(self, request: HttpRequest, obj: Document | None) -> list[Any]:
        return [IngestionJobInline, NodeInline] if obj is not None else []

    @admin.display(description="pages")
    def pages(self, document: Document) -> int:
        return len(document.page_spans or [])

    @admin.display(description="read by OCR")
    def read_by_ocr(self, document: Document) -> str:
        return ocr_note(document) or "—"

    @admin.display(description="original file")
    def original_file(self, document: Document) -> str:
        if not document.original:
            return "—"
        return format_html(
            '<a href="{}">{}</a>', reverse("documents:original", args=[document.pk]), download_name(document)
        )

    @admin.display(description="text")
    def text_preview(self, document: Document) -> str:
        text = Document.objects.values_list("content", flat=True).get(pk=document.pk)
        return Truncator(text).chars(2000)

    def save_through_service(self, request: HttpRequest, form: forms.ModelForm, change: bool) -> Document:
        data = form.cleaned_data
        if not change:
            cleaned = data["cleaned"]
            file = data.get("file")
            result = document_create(
                collection=data["collection"],
                # A file goes as its bytes: its format and original are the service's to keep.
                content=file[0] if file else cleaned.text,
                source_filename=file[1] if file else "",
                title=cleaned.title,
                tags=cleaned.tags,
                metadata=cleaned.metadata,
                builder=cleaned.builder,
            )
            if not result.created:
                self.message_user(
                    request,
                    "This collection already holds the same text or file; showing that document.",
                    level=messages.WARNING,
                )
            return result.document
        return document_update(
            document=form.instance,
            title=data["title"],
            tags=data.get("tags_text", ""),
            metadata=data["metadata"],
        )

    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        document_delete(document=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        for document in queryset:
            document_delete(document=document)

    @admin.action(description="Re-index the selected documents")
    def reindex(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        for document in queryset:
            document_reindex(document=document)
        self.message_user(request, f"Queued {queryset.count()} document(s) for re-indexing.")

    @admin.action(description="Retry the failed ingestion of the selected documents")
    def retry_failed(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        retried = 0
        for document in queryset:
            latest = document.jobs.order_by("-created", "-id").first()
            if latest is not None and latest.status == IngestionJob.Status.FAILED:
                job_retry(job=latest)
                retried += 1
        self.message_user(
            request, f"Retried {retried} failed job(s); documents without one were left as they are."
        )


# -- nodes ----------------------------------------------------------------------------------------


class NodeForm(forms.ModelForm):
    class Meta:
        model = Node
        fields = ["title", "summary"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        try:
            node_texts_clean(
                kind=self.instance.kind, title=data.get("title", ""), summary=data.get("summary", "")
            )
        except UserInputError as error:
            raise forms.ValidationError(str(error)) from None
        return data


@admin.register(Node)
class NodeAdmin(SavedByServiceMixin, admin.ModelAdmin):
    form = NodeForm
    list_display = [
        "__str__",
        "document",
        "kind",
        "depth",
        "order",
        "token_count",
        "edited",
        "embedding_stale",
    ]
    list_filter = ["kind", "edited", "embedding_stale", "document__collection", "document__builder"]
    search_fields = ["title", "summary", "toc_path"]
    list_select_related = ["document"]
    fields = (
        "document",
        "kind",
        "depth",
        "order",
        "toc_path",
        "title",
        "summary",
        "start_char",
        "end_char",
        "token_count",
        "edited",
        "embedding_stale",
        "text_preview",
        "embedding_preview",
    )
    readonly_fields = tuple(field for field in fields if field not in ("title", "summary"))

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        return super().get_queryset(request).defer("embedding", "content")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # nodes come from ingestion; the tree keeps its leaves partitioning the text

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_through_service(self, request: HttpRequest, form: forms.ModelForm, change: bool) -> Node:
        result = node_update(
            node=form.instance, title=form.cleaned_data["title"], summary=form.cleaned_data["summary"]
        )
        if result.reembedding:
            self.message_user(request, f"Re-embedding {len(result.reembedding)} node(s) in the background.")
        return result.node

    @admin.display(description="text")
    def text_preview(self, node: Node) -> str:
        text = Node.objects.values_list("content", flat=True).get(pk=node.pk)
        return Truncator(text).chars(2000) if text else "—"

    @admin.display(description="embedding")
    def embedding_preview(self, node: Node) -> str:
        vector = Node.objects.values_list("embedding", flat=True).get(pk=node.pk)
        if vector is None:
            return "—"
        values = list(vector)
        head = ", ".join(f"{value:.4f}" for value in values[:8])
        return f"[{head}, …] ({len(values)} dimensions)"


# -- jobs -----------------------------------------------------------------------------------------


@admin.register(IngestionJob)
class IngestionJobAdmin(admin.ModelAdmin):
    list_display = [
        "document",
        "status",
        "stage",
        "progress",
        "llm_calls",
        "llm_cost_usd",
        "created",
        "finished",
    ]
    list_filter = ["status", "stage", "document__collection"]
    search_fields = ["document__title", "error"]
    list_select_related = ["document"]
    readonly_fields = [field.name for field in IngestionJob._meta.fields]
    actions = ["retry"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # jobs are made by uploads and re-indexing

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the record of what happened stays

    @admin.action(description="Retry the selected failed jobs")
    def retry(self, request: HttpRequest, queryset: QuerySet[IngestionJob]) -> None:
        failed = queryset.filter(status=IngestionJob.Status.FAILED).select_related("document")
        for job in failed:
            job_retry(job=job)
        self.message_user(request, f"Retried {len(failed)} failed job(s).")
