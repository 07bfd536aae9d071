"""A document's files as HTTP responses: the original as uploaded, and its pages as images.

Shared by the document page (``documents.views``) and the REST API (``api.views.documents``);
each caller has already checked that the person may see the document.
"""

from __future__ import annotations

from django.http import FileResponse, HttpResponse
from django.http.response import HttpResponseBase
from django.utils.http import content_disposition_header

from documents.models import Document
from openfable.display_text import displayable

_TYPES: dict[str, str] = {
    Document.Format.PDF: "application/pdf",
    Document.Format.DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    Document.Format.HTML: "text/html; charset=utf-8",
    Document.Format.MARKDOWN: "text/markdown; charset=utf-8",
    Document.Format.TEXT: "text/plain; charset=utf-8",
}
# What the original comes back as, one per format (the API's schema lists them).
ORIGINAL_MEDIA_TYPES = tuple(sorted({value.split(";")[0] for value in _TYPES.values()}))
_EXTENSIONS: dict[str, str] = {
    Document.Format.PDF: ".pdf",
    Document.Format.DOCX: ".docx",
    Document.Format.HTML: ".html",
    Document.Format.MARKDOWN: ".md",
    Document.Format.TEXT: ".txt",
}


def original_response(document: Document) -> HttpResponseBase:
    """The file as it was uploaded, as an attachment; a document sent as text is its own
    original, so it comes back as a .txt or .md file. Always ``Content-Disposition: attachment``
    and ``nosniff``: an uploaded HTML page is never rendered on this site's origin."""
    name = download_name(document)
    content_type = _TYPES.get(document.format, "application/octet-stream")
    if document.original:
        response: HttpResponseBase = FileResponse(
            document.original.open("rb"), as_attachment=True, filename=name, content_type=content_type
        )
    else:
        response = HttpResponse(document.content.encode("utf-8"), content_type=content_type)
        response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=name)
    response["X-Content-Type-Options"] = "nosniff"
    return response


def download_name(document: Document) -> str:
    """The name it was uploaded under, else its title with the format's extension; without control
    and formatting characters, for names stored before they were cleaned on the way in."""
    name = displayable((document.source_filename or "").replace("\\", "/").rsplit("/", 1)[-1])
    if name:
        return name
    return f"{displayable(document.title) or 'document'}{_EXTENSIONS.get(document.format, '')}"
