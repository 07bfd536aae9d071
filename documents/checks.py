"""A worker that would read scans by OCR but cannot: said at start-up, not first in a failed job.

With OPENFABLE_OCR=auto and no Tesseract at all, scans are refused as they always were (nothing to
warn about: OCR is simply not installed). With Tesseract installed but without a language
OPENFABLE_OCR_LANGUAGES names, every scan's job would fail: that is a mistake in the setup.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import Tags, Warning, register


@register(Tags.compatibility)
def check_ocr(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    from documents.services.extracting import ocr_options  # a service module: not at app loading

    _, unavailable = ocr_options()
    if not unavailable:
        return []
    return [
        Warning(
            f"OCR cannot run: {unavailable}.",
            hint="Scanned PDFs fail their jobs until it can; set OPENFABLE_OCR=off to refuse them instead.",
            id="openfable.W010",
        )
    ]
