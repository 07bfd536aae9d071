"""Filters for showing a document's text to a person."""

from __future__ import annotations

from django import template

from documents.ingestion.heading_titles import without_heading_marks

register = template.Library()


@register.filter
def unmarked(text: str) -> str:
    """A passage without the markdown heading marks the stored text carries ("## 4. Term")."""
    return without_heading_marks(str(text))
