"""The rules document input keeps, in one place: text, files, titles, tags, metadata and the
builder asked for. Each refusal is a ``DocumentInputError`` whose message says what was wrong and
what to do; every surface shows it as it is. ``document_input_clean`` runs them all, so that a form
can show the same messages beside its fields before anything is written (the admin's add form
does); ``documents.services.documents`` stores what it returns.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from documents.ingestion.extraction import Detected, ExtractionError, detect_format
from documents.models import FILE_FORMATS, Document
from openfable.display_text import displayable
from openfable.errors import UserInputError

TAG_MAX_CHARS = 100  # Document.tags holds CharField(max_length=100) items
# Tags a document carries, and their characters together: every tag reaches the corpus page's
# filter and each query's tag check (100,000 tags made the page 7 MB and 6 s).
TAGS_MAX_COUNT = 50
TAGS_MAX_TOTAL_CHARS = 2_000
TITLE_MAX_CHARS = 500
METADATA_MAX_DEPTH = 20  # levels of objects and lists; real metadata is a level or two


class DocumentInputError(UserInputError):
    """Document or collection input a user can fix: the message says what was wrong and what to do."""


class UnsupportedFileError(DocumentInputError):
    """A file in a format OpenFable does not read (an old .doc, a zip, an image): 415."""

    status = 415
    code = "unsupported_format"


class FileTooLargeError(DocumentInputError):
    """A file over OPENFABLE_MAX_FILE_BYTES: 413."""

    status = 413
    code = "too_large"


@dataclass(frozen=True)
class DocumentInput:
    """Document fields checked and normalised: what ``document_create`` stores."""

    text: str
    title: str
    source_filename: str
    tags: list[str]
    metadata: dict[str, Any]
    builder: str
    # A PDF, Word or HTML file: its bytes, kept as the original; ``text`` is "" until the worker
    # extracts it.
    file: bytes | None = None
    format: str = Document.Format.TEXT
    format_note: str = ""  # the name and the content disagree (read by content)


def decode_document_bytes(data: bytes, *, filename: str = "") -> str:
    """Uploaded files must be UTF-8 text (.txt / .md); a byte-order mark is dropped."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        where = f" in {filename}" if filename else ""
        raise DocumentInputError(
            f"The file{where} is not UTF-8 text (invalid byte at position {error.start}). "
            "Save it as UTF-8 plain text or Markdown and upload it again."
        ) from error


def document_input_clean(
    *,
    content: str | bytes | None,
    title: str = "",
    source_filename: str = "",
    tags: Iterable[str] | None = None,
    metadata: object = None,
    builder: str = "",
) -> DocumentInput:
    """Check and normalise what a user sends; raise ``DocumentInputError`` naming the problem.

    ``content`` as ``bytes`` is a file: its format is told from its content (``source_filename``
    only breaks a tie). A PDF, Word or HTML file is kept whole for the worker to extract; a
    Markdown or text file is its text. Separate from ``document_create`` so that a form can show
    the same messages beside its fields before anything is written (the admin's add form does).
    """
    source_filename = clean_filename(source_filename)
    # An empty file is refused as any empty document is, in the same words.
    detected = (
        _detect_file(content, filename=source_filename)
        if isinstance(content, bytes) and content.strip()
        else None
    )
    file = content if detected is not None and detected.format in FILE_FORMATS else None
    text = "" if file is not None else _clean_text(content, filename=source_filename)
    return DocumentInput(
        text=text,
        title=clean_title(title) or _default_title(text, source_filename),
        source_filename=source_filename,
        tags=clean_tags(tags),
        metadata=clean_metadata(metadata),
        builder=clean_builder(builder),
        file=file if isinstance(file, bytes) else None,
        format=detected.format if detected is not None else Document.Format.TEXT,
        format_note=detected.mismatch if detected is not None else "",
    )


def _detect_file(data: bytes, *, filename: str) -> Detected:
    """The file's format from its content; what ``detect_format`` can already see is refused now
    (empty, an old .doc, a damaged zip), the rest is for the worker's extraction to find."""
    name = (filename or "the file").rsplit("/", 1)[-1]
    if len(data) > settings.MAX_FILE_BYTES:
        raise FileTooLargeError(
            f"{name} is {len(data):,} bytes; files may have at most {settings.MAX_FILE_BYTES:,} "
            "(OPENFABLE_MAX_FILE_BYTES). Split it and upload the parts.",
            details={"limit_bytes": settings.MAX_FILE_BYTES},
        )
    try:
        return detect_format(data, filename=name)
    except ExtractionError as error:
        if error.code == "unsupported_format":
            raise UnsupportedFileError(f"{error.message}.") from None
        raise DocumentInputError(f"{error.message}.", code=error.code) from None


def _clean_text(content: str | bytes | None, *, filename: str) -> str:
    if content is None:
        raise DocumentInputError("The document text is missing. Paste or upload some text.")
    if isinstance(content, bytes):
        text = decode_document_bytes(content, filename=filename)
    elif isinstance(content, str):
        text = content
    else:
        raise DocumentInputError(f"The document text must be a string, not {type(content).__name__}.")
    if not text.strip():
        raise DocumentInputError("The document is empty (only whitespace). Paste or upload some text.")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise DocumentInputError(
            f"The text has an invalid character at position {error.start} (a lone surrogate, "
            "e.g. half of an emoji cut by a bad copy). Fix or remove it and send the text again."
        ) from None
    if size > settings.MAX_DOCUMENT_BYTES:
        raise DocumentInputError(
            f"The document is {size:,} bytes; the limit is {settings.MAX_DOCUMENT_BYTES:,} "
            "(OPENFABLE_MAX_DOCUMENT_BYTES). Split it into smaller documents."
        )
    if "\x00" in text:
        raise DocumentInputError("The document contains NUL characters; it does not look like text.")
    return text


def clean_tags(tags: Iterable[str] | str | None) -> list[str]:
    """Tags sorted and without repeats; an over-long or non-text tag, or too many, is refused, never cut."""
    if tags is None:
        return []
    if isinstance(tags, str):
        tags = tags.split(",")
    cleaned: set[str] = set()
    for tag in tags:
        if not isinstance(tag, str):
            raise DocumentInputError(f"Tags are text; {tag!r} is not.")
        tag = tag.strip()
        if len(tag) > TAG_MAX_CHARS:
            raise DocumentInputError(
                f"The tag {tag[:40]!r}… is {len(tag)} characters; tags hold at most {TAG_MAX_CHARS}."
            )
        if "\x00" in tag:
            raise DocumentInputError(f"The tag {tag[:40]!r} contains a NUL character; remove it.")
        if tag:
            cleaned.add(tag)
    if len(cleaned) > TAGS_MAX_COUNT:
        raise DocumentInputError(
            f"{len(cleaned):,} tags; a document carries at most {TAGS_MAX_COUNT}. Keep the ones you "
            "filter by (the rest can go in the metadata)."
        )
    if (total := sum(len(tag) for tag in cleaned)) > TAGS_MAX_TOTAL_CHARS:
        raise DocumentInputError(
            f"The tags hold {total:,} characters together; a document's tags hold at most "
            f"{TAGS_MAX_TOTAL_CHARS:,}. Use fewer or shorter tags (the rest can go in the metadata)."
        )
    return sorted(cleaned)


def clean_metadata(metadata: object) -> dict[str, Any]:
    """Metadata is a JSON object (a dict of JSON values); anything else is refused."""
    if metadata is None or metadata == "":
        return {}
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except RecursionError:
            raise DocumentInputError(_METADATA_TOO_DEEP) from None
        except ValueError as error:
            raise DocumentInputError(f"The metadata is not valid JSON: {error}.") from None
    if not isinstance(metadata, Mapping):
        raise DocumentInputError(
            f'The metadata must be a JSON object such as {{"source": "web"}}, not {type(metadata).__name__}.'
        )
    _metadata_check_shape(metadata)
    try:
        # Round-trip: refuses what JSON cannot hold (sets, dates, NaN) and lone surrogates.
        return dict(json.loads(json.dumps(metadata, allow_nan=False, ensure_ascii=False).encode("utf-8")))
    except (TypeError, ValueError, UnicodeEncodeError) as error:
        raise DocumentInputError(f"The metadata cannot be stored as JSON: {error}.") from None


_METADATA_TOO_DEEP = (
    f"The metadata is nested more than {METADATA_MAX_DEPTH} levels deep; flatten it "
    '(e.g. {"source.site": "web"}).'
)


def _metadata_check_shape(metadata: Mapping[str, Any]) -> None:
    """Refuse nesting deeper than ``METADATA_MAX_DEPTH`` and NUL characters, walking without
    recursion: 10,000 levels would overflow the JSON encoder's stack, and PostgreSQL's jsonb
    cannot hold ``\u0000``."""
    pending: list[tuple[object, int]] = [(metadata, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, Mapping | list | tuple):
            if depth > METADATA_MAX_DEPTH:
                raise DocumentInputError(_METADATA_TOO_DEEP)
            children = [*value.keys(), *value.values()] if isinstance(value, Mapping) else list(value)
            pending.extend((child, depth + 1) for child in children)
        elif isinstance(value, str) and "\x00" in value:
            raise DocumentInputError(f"The metadata holds a NUL character (in {value[:40]!r}); remove it.")


def clean_title(title: str | None) -> str:
    """A title without control and formatting characters (``openfable.display_text``: a NUL, a
    right-to-left override), on every surface; an over-long one is refused, never cut."""
    if title is None:
        return ""
    if not isinstance(title, str):
        raise DocumentInputError(f"A title is text, not {type(title).__name__}.")
    title = displayable(title)
    if len(title) > TITLE_MAX_CHARS:
        raise DocumentInputError(
            f"The title is {len(title)} characters; titles hold at most {TITLE_MAX_CHARS}."
        )
    return title


def clean_filename(filename: str | None) -> str:
    """The name a file was sent under, as stored, shown and offered back on download: without
    control and formatting characters (``invoice_<RLO>fdp.exe`` shows as an .exe, a NUL cannot be
    stored), and cut to TITLE_MAX_CHARS (a name only names; nothing is refused for it)."""
    if not isinstance(filename, str):
        return ""
    return displayable(filename)[:TITLE_MAX_CHARS]


def clean_builder(builder: str | None) -> str:
    builder = builder or ""
    if builder not in {"", *Document.Builder.values}:
        raise DocumentInputError(
            f"Unknown builder {builder!r}; use 'llm' or 'structural' (or leave it empty)."
        )
    return builder


def _default_title(text: str, filename: str) -> str:
    if filename:
        return filename.rsplit("/", 1)[-1].rsplit(".", 1)[0][:TITLE_MAX_CHARS] or filename[:TITLE_MAX_CHARS]
    first_line = next((line.strip(" #\t") for line in text.splitlines() if displayable(line)), "Untitled")
    return displayable(first_line)[:120] or "Untitled"
