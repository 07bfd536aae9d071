from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from documents.models import Collection, Document, IngestionJob, Node


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


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "owner", "created"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    filter_horizontal = ["members"]


class IngestionJobInline(admin.TabularInline):
    model = IngestionJob
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ["status", "stage", "progress", "llm_calls", "llm_cost_usd", "error", "created", "finished"]
    readonly_fields = [
        "status",
        "stage",
        "progress",
        "llm_calls",
        "llm_cost_usd",
        "error",
        "created",
        "finished",
    ]


class NodeInline(admin.TabularInline):
    model = Node
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ["order", "kind", "depth", "title", "start_char", "end_char", "token_count", "edited"]
    readonly_fields = ["order", "kind", "depth", "start_char", "end_char", "token_count"]
    ordering = ["order"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        return super().get_queryset(request).defer("embedding", "content")


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["title", "collection", "status", "builder", "token_count", "updated"]
    list_filter = ["status", "collection", "builder", _TagFilter]
    search_fields = ["title", "source_filename", "content_hash"]
    list_select_related = ["collection"]
    readonly_fields = ["content_hash", "token_count", "builder", "embedding_model", "created", "updated"]
    inlines = [IngestionJobInline, NodeInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        return super().get_queryset(request).defer("content")


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["__str__", "document", "kind", "depth", "order", "token_count", "edited"]
    list_filter = ["kind", "edited", "document__collection", "document__builder"]
    search_fields = ["title", "summary", "toc_path", "content"]
    list_select_related = ["document"]
    raw_id_fields = ["document", "parent"]
    readonly_fields = ["embedding_preview"]
    exclude = ["embedding"]

    @admin.display(description="embedding")
    def embedding_preview(self, node: Node) -> str:
        if node.embedding is None:
            return "—"
        values = list(node.embedding)
        head = ", ".join(f"{value:.4f}" for value in values[:8])
        return f"[{head}, …] ({len(values)} dimensions)"


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
