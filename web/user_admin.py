"""The user admin, deleting through ``users_delete``: a person's collections and documents are
kept as the operator's, and both confirmation pages say so before anything is deleted."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy

from documents.services.users import user_deletion_plan, users_delete

User = get_user_model()


class PersonAdmin(UserAdmin):
    delete_confirmation_template = "admin/auth/user/delete_confirmation.html"
    delete_selected_confirmation_template = "admin/auth/user/delete_selected_confirmation.html"
    actions = ["delete_selected"]

    def render_delete_form(self, request: HttpRequest, context: dict[str, Any]) -> HttpResponse:
        context["deletions"] = [user_deletion_plan(user=context["object"])]
        return super().render_delete_form(request, context)

    @admin.action(permissions=["delete"], description=gettext_lazy("Delete selected %(verbose_name_plural)s"))
    def delete_selected(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        # Django's own action (its permission checks, its log entries, its delete_queryset), with
        # what becomes of each person's collections on its confirmation page.
        response = django_delete_selected(self, request, queryset)
        if isinstance(response, TemplateResponse) and response.context_data is not None:
            response.context_data["deletions"] = [user_deletion_plan(user=user) for user in queryset]
        return response

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        for deletion in users_delete(users=[obj]):
            self.message_user(request, deletion.outcome)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for deletion in users_delete(users=list(queryset)):
            self.message_user(request, deletion.outcome)


admin.site.unregister(User)
admin.site.register(User, PersonAdmin)
