"""``{% ask_form document %}``: the question box of the document page (issue 22 item 8).

The document page belongs to the documents app, which may not import retrieval (the layers);
the box's choices (modes, budget bounds) are retrieval's, so retrieval renders the box itself."""

from __future__ import annotations

from typing import Any

from django import template
from django.conf import settings

from retrieval.result import MODES

register = template.Library()


@register.inclusion_tag("retrieval/_ask_form.html")
def ask_form(document: Any) -> dict[str, Any]:
    return {
        "document": document,
        "modes": MODES,
        "budget_min": settings.TOKEN_BUDGET_MIN,
        "budget_max": settings.TOKEN_BUDGET_MAX,
        "budget_default": settings.TOKEN_BUDGET_DEFAULT,
    }
