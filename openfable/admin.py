"""API tokens in the admin: made through ``token_create`` (the key shown once), revoked, never edited."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from openfable.admin_services import SavedByServiceMixin
from openfable.api_tokens import token_create, token_revoke
from openfable.models import ApiToken


class ApiTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["user", "name"]


@admin.register(ApiToken)
class ApiTokenAdmin(SavedByServiceMixin, admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ["name", "user", "prefix", "created", "last_used", "revoked"]
    list_filter = ["revoked"]
    search_fields = ["name", "user__username", "prefix"]
    list_select_related = ["user"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> list[str]:
        if obj is None:
            return []
        return ["user", "name", "prefix", "created", "last_used", "revoked"]

    def save_through_service(self, request: HttpRequest, form: forms.ModelForm, change: bool) -> ApiToken:
        if change:
            return form.instance
        token, key = token_create(user=form.cleaned_data["user"], name=form.cleaned_data["name"])
        self.message_user(
            request,
            f"The key of “{token.name}” is {key} — copy it now, it is not shown again.",
            messages.WARNING,
        )
        return token

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoke instead: the record of a key stays

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            token_revoke(token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s); they stop working at once.")
