"""Forms of the corpus pages. They check shapes only; the rules are the services' (their messages
are shown beside the fields)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

# What the file pickers offer; the format is read from the content, so this only helps choose.
ACCEPTED_FILES = ".pdf,.docx,.html,.htm,.md,.markdown,.txt,application/pdf,text/html,text/markdown,text/plain"


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files from one input (Django's documented pattern)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput(attrs={"accept": ACCEPTED_FILES}))
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class UploadForm(forms.Form):
    collection = forms.ChoiceField(required=False, label="Collection")
    title = forms.CharField(
        required=False, max_length=500, label="Title", help_text="from the first line when empty"
    )
    text = forms.CharField(
        required=False, strip=False, widget=forms.Textarea(attrs={"rows": 8}), label="Text"
    )
    uploads = MultipleFileField(required=False, label="Or files (PDF, Word .docx, HTML, Markdown, text)")
    tags = forms.CharField(required=False, label="Tags", help_text="comma-separated")

    def __init__(self, *args: Any, collections: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [("", "My documents"), *((c.slug, c.name) for c in collections)]
        self.fields["collection"].choices = choices  # type: ignore[attr-defined]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("uploads") and not (data.get("text") or "").strip():
            raise forms.ValidationError("Paste some text or choose one or more files.")
        if data.get("uploads") and (data.get("text") or "").strip():
            raise forms.ValidationError("Add either pasted text or files, not both at once.")
        for upload in data.get("uploads") or []:
            if upload.size > settings.MAX_FILE_BYTES:
                # Refused from its declared size, before the whole file is read (as the REST API does).
                self.add_error(
                    "uploads",
                    f"{upload.name}: the file is {upload.size:,} bytes; the limit is "
                    f"{settings.MAX_FILE_BYTES:,} (OPENFABLE_MAX_FILE_BYTES). Split it into smaller files.",
                )
        return data
