"""The admin saves through the services: one mixin instead of the same three overrides per model."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import HttpRequest


class SavedByServiceMixin:
    """A ModelAdmin whose form is saved by ``save_through_service`` (a service call that returns the
    saved object), never by ``form.save()``. Inline formsets (read-only here) are still handed to
    ``save_formset``: it writes nothing for unchanged forms, and the admin's change message reads it."""

    def save_through_service(self, request: HttpRequest, form: forms.ModelForm, change: bool) -> Any:
        raise NotImplementedError

    def save_form(self, request: HttpRequest, form: forms.ModelForm, change: bool) -> Any:
        return self.save_through_service(request, form, change)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        pass  # saved by save_through_service

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)  # type: ignore[attr-defined]
