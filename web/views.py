"""The corpus pages. Views only parse, call a selector or service, and render; a user sees only
the collections they own or are a member of (``documents.selectors``). On an htmx request a
view renders the page's fragment (``page.html#fragment``), else the whole page, so every link
and form also works without JavaScript."""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.http import FileResponse, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from documents import selectors
from documents.files import original_response
from documents.ingestion.heading_titles import without_heading_marks
from documents.models import FILE_FORMATS, Document, IngestionJob
from documents.page_images import node_page_views, page_image_path
from documents.presenters import ocr_note
from documents.progress_words import progress_words
from documents.services import nodes
from documents.services.documents import document_create, document_delete, document_reindex, job_retry
from openfable.errors import NotFoundError, OpenFableError, UserInputError
from openfable.http import HtmxHttpRequest
from openfable.llm import llm_configured
from openfable.rate_limit import rate_limit_check
from web.forms import UploadForm
from web.history_words import edit_words_of

PAGE_SIZE = 25
CORPUS = "documents/corpus.html"


@login_required
def corpus(request: HtmxHttpRequest) -> HttpResponse:
    collections = selectors.collection_list(user=request.user)
    form = UploadForm(collections=collections, initial=_upload_defaults(request))
    status = 200
    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES, collections=collections)
        if form.is_valid() and _upload(request, form):
            if not request.htmx:
                return redirect("documents:home")
            # A fresh form under the updated table, still on the collection just used.
            form = UploadForm(collections=collections, initial=_upload_defaults(request))
        elif not request.htmx:
            status = 400
    context = _corpus_context(request, collections=collections, form=form)
    template = f"{CORPUS}#corpus-body" if request.htmx else CORPUS
    return render(request, template, context, status=status)


def _upload(request: HtmxHttpRequest, form: UploadForm) -> bool:
    """Store every pasted text or file, or none of them; a refusal goes beside its field."""
    data = form.cleaned_data
    items: list[tuple[str, Any, str]] = (
        [("uploads", upload.read(), upload.name) for upload in data["uploads"]]
        if data["uploads"]
        else [("text", data["text"].replace("\r\n", "\n"), "")]
    )
    created = []
    try:
        with transaction.atomic():
            for field, content, filename in items:
                try:
                    created.append(
                        document_create(
                            collection=data["collection"] or None,
                            content=content,
                            title=data["title"] if len(items) == 1 else "",
                            source_filename=filename,
                            tags=data["tags"],
                            user=request.user,
                        )
                    )
                except UserInputError as error:
                    form.add_error(field, f"{filename}: {error}" if filename else str(error))
                    raise
    except UserInputError:
        # Storage has no transactions: originals written for the documents rolled back go too.
        for result in created:
            if result.created and result.document.original:
                result.document.original.delete(save=False)
        return False
    added = sum(1 for result in created if result.created)
    request.session[_UPLOAD_COLLECTION] = data["collection"] or ""
    messages.success(request, _upload_message(added=added, known=len(created) - added))
    return True


_UPLOAD_COLLECTION = "upload_collection"  # the collection of the last upload: the next one's default


def _upload_defaults(request: HtmxHttpRequest) -> dict[str, str]:
    return {"collection": request.session.get(_UPLOAD_COLLECTION, "")}


def _upload_message(*, added: int, known: int) -> str:
    """What an upload did, in words: "Added 2 documents; indexing has started." """

    def documents(count: int) -> str:
        return f"{count} document{'' if count == 1 else 's'}"

    if not added:
        return (
            "Nothing new to add: that document is already in the collection."
            if known == 1
            else f"Nothing new to add: those {documents(known)} are already in the collection."
        )
    already = f" {documents(known)} {'was' if known == 1 else 'were'} already there." if known else ""
    return f"Added {documents(added)}; indexing has started.{already}"


def _corpus_context(request: HtmxHttpRequest, *, collections: Any, form: UploadForm) -> dict[str, Any]:
    params = request.GET
    filters = {
        "collection": params.get("collection", ""),
        "status": params.get("status", ""),
        "tag": params.get("tag", ""),
        "search": params.get("q", ""),
    }
    documents = selectors.document_list(
        user=request.user,
        collection=filters["collection"] or None,
        status=filters["status"] or None,
        tag=filters["tag"] or None,
        search=filters["search"] or None,
    )
    sort = params.get("sort", "-updated")
    page = Paginator(
        selectors.with_latest_job(selectors.documents_sorted(documents, sort)), PAGE_SIZE
    ).get_page(params.get("page"))
    page.object_list = _with_progress_words(list(page.object_list))
    return {
        "form": form,
        "collections": collections,
        "page": page,
        "filters": filters,
        "sort": sort,
        "statuses": Document.Status.choices,
        "tags": _tag_choices(request, filters["tag"]),
        "invitation_count": selectors.invitations_for(user=request.user).count(),
    }


def _tag_choices(request: HtmxHttpRequest, chosen: str) -> list[str]:
    """The filter's tags: the most used ones, and the one chosen even when it is not among them."""
    tags = selectors.document_tags(user=request.user)
    return sorted([*tags, chosen]) if chosen and chosen not in tags else tags


@login_required
def document_row(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One row of the corpus table: polled while its document is being indexed."""
    document = _row_document(request, pk)
    return render(request, f"{CORPUS}#document-row", {"document": document})


@login_required
@require_POST
def document_delete_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    document = selectors.document_get(user=request.user, pk=pk)
    title = document.title
    document_delete(document=document)
    if request.htmx:
        return HttpResponse("")  # the row goes away
    messages.success(request, f"Deleted “{title}”.")
    return redirect("documents:home")


@login_required
@require_POST
def document_reindex_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    document = selectors.document_get(user=request.user, pk=pk)
    latest = selectors.document_latest_job(document=document)
    if latest is not None and latest.status == IngestionJob.Status.FAILED:
        job_retry(job=latest)  # the builder it asked for, again
    else:
        document_reindex(document=document)
    if request.htmx:
        return render(request, f"{CORPUS}#document-row", {"document": _row_document(request, pk)})
    return redirect("documents:home")


def _row_document(request: HtmxHttpRequest, pk: int) -> Document:
    document = selectors.with_latest_job(selectors.document_list(user=request.user)).filter(pk=pk).first()
    if document is None:
        raise NotFoundError(f"There is no document {pk}. Use the id of a document you can see.")
    return _with_progress_words([document])[0]


def _with_progress_words(documents: list[Document]) -> list[Document]:
    """Each document (from ``selectors.with_latest_job``) with ``progress_words`` for its row."""
    now = timezone.now()
    for document in documents:
        document.progress_words = progress_words(  # type: ignore[attr-defined]
            status=getattr(document, "job_status", None),
            stage=getattr(document, "job_stage", None),
            percent=getattr(document, "job_progress", None),
            done=getattr(document, "job_stage_done", None),
            total=getattr(document, "job_stage_total", None),
            stage_started=getattr(document, "job_stage_started", None),
            ahead=getattr(document, "job_ahead", None),
            now=now,
        )
    return documents


@login_required
def document_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The tree as an outline; a selected node (``?node=``) shown inside the whole text."""
    return _detail(request, pk, node_id=selectors.as_id(request.GET.get("node")))


def _detail(request: HtmxHttpRequest, pk: int, *, node_id: int | None) -> HttpResponse:
    document = selectors.document_get(user=request.user, pk=pk)  # NotFoundError: a 404 page
    tree = selectors.document_tree(document=document)
    flat = {node["id"]: node for node in _walk(tree)}
    for node in flat.values():
        # A passage is named by its opening words, its heading lines without their "## " (a
        # Markdown file's own marks too: the outline is a list a person reads).
        opening = without_heading_marks(document.content[node["start_char"] : node["end_char"]])
        node["label"] = node["title"] or _opening(opening)
    # Nothing is selected until the person picks a node: the page opens on the plain text.
    selected = flat.get(node_id or -1)
    move_places = _move_places(document, flat, selected)
    context = {
        "document": document,
        "ocr_note": ocr_note(document),
        "tree": tree,
        "selected": selected,
        "latest_job": selectors.document_latest_job(document=document),
        "history": [
            (edit, edit_words_of(edit)) for edit in selectors.document_history_shown(document=document)
        ],
        "review": selectors.document_review(document=document)[:50],
        "llm_configured": llm_configured(),
        "move_places": move_places,
        "move_targets": {place["parent"]["id"] for place in move_places},  # drop targets in the outline
        "siblings_after": _siblings_after(flat, selected),
        "page_views": (
            node_page_views(document=document, start=selected["start_char"], end=selected["end_char"])
            if selected
            else []
        ),
        **_text_around(document.content, selected, headings=document.format in FILE_FORMATS),
    }
    template = "documents/detail.html#document-layout" if request.htmx else "documents/detail.html"
    return render(request, template, context)


@login_required
def document_original(request: HtmxHttpRequest, pk: int) -> HttpResponseBase:
    """The file as uploaded, to whoever may see the document (anyone else: a 404)."""
    return original_response(selectors.document_get(user=request.user, pk=pk))


@login_required
def document_page_image(request: HtmxHttpRequest, pk: int, page: int) -> HttpResponseBase:
    """Page ``page`` of a PDF document as a PNG, drawn once and kept (``documents.page_images``).
    Counted in the user's API rate (``openfable.rate_limit``): each drawing starts a process."""
    rate_limit_check(user=request.user)
    document = selectors.document_get(user=request.user, pk=pk)
    response = FileResponse(
        page_image_path(document=document, page=page).open("rb"), content_type="image/png"
    )
    response["Cache-Control"] = "private, max-age=86400"  # a document's file never changes
    return response


def _move_places(
    document: Document, flat: dict[int, Any], node: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Where the selected node can move (``selectors.node_move_places``: the move's own rule)."""
    places = (
        selectors.node_move_places(document=document, node_id=node["id"]) if node and node["parent"] else []
    )
    return [
        {"parent": flat[p.parent_id], "after": flat.get(p.after_id or -1), "last": p.last} for p in places
    ]


def _siblings_after(flat: dict[int, dict[str, Any]], node: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The node's next siblings, in order (the choices for "group up to")."""
    if node is None or node["parent"] is None:
        return []
    siblings = flat[node["parent"]]["children"]
    return siblings[siblings.index(node) + 1 :]


def _walk(nodes: list[dict[str, Any]]) -> Any:
    for node in nodes:
        yield node
        yield from _walk(node["children"])


def _opening(text: str, words: int = 10) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def _text_around(text: str, node: dict[str, Any] | None, *, headings: bool = False) -> dict[str, str]:
    """The document text split around the selected node's exact span.

    ``headings``: the text was extracted from a file, which writes its headings as markdown
    lines ("## 4. Payment") for the tree builders: each shows as a heading, its "## " hidden
    but still in the page, so that every offset the page's scripts count (the split point, the
    answer's marks) is still one of the stored text."""
    start, end = (node["start_char"], node["end_char"]) if node is not None else (len(text), len(text))
    if not headings:
        return {"text_before": text[:start], "text_selected": text[start:end], "text_after": text[end:]}
    lines = [(m.start(1), m.end(1), m.end(2)) for m in _HEADING_LINE.finditer(text)]
    return {
        "text_before": _with_headings(text, 0, start, lines),
        "text_selected": _with_headings(text, start, end, lines),
        "text_after": _with_headings(text, end, len(text), lines),
    }


_HEADING_LINE = re.compile(r"^(#{1,6} )(?=\S)(.*)$", re.MULTILINE)


def _with_headings(text: str, low: int, high: int, lines: list[tuple[int, int, int]]) -> str:
    """``text[low:high]`` as HTML: each heading line's marks hidden, its title strong."""
    parts: list[str] = []
    at = low
    for mark_start, title_start, line_end in lines:
        if line_end <= low or mark_start >= high:
            continue
        for tag, (start, end) in (
            ('span class="heading-mark" aria-hidden="true"', (mark_start, title_start)),
            ('strong class="heading-line"', (title_start, line_end)),
        ):
            start, end = max(start, at), min(end, high)
            if start < end:
                name = tag.split(" ", 1)[0]
                parts += [escape(text[at:start]), f"<{tag}>", escape(text[start:end]), f"</{name}>"]
                at = end
    parts.append(escape(text[at:high]))
    return mark_safe("".join(parts))  # every piece of the text was escaped above


# -- tree edits ----------------------------------------------------------------------------------

EDITS = ("update", "regenerate", "split", "merge", "move", "group", "dissolve", "exclude", "include", "undo")


@login_required
@require_POST
def document_edit(request: HtmxHttpRequest, pk: int, operation: str) -> HttpResponse:
    """One tree edit from the document page: one service call; a refusal is shown in the panel."""
    document = selectors.document_get(user=request.user, pk=pk)
    form = request.POST
    node_id = selectors.as_id(form.get("node"))
    selected = node_id
    try:
        version = _version(form.get("tree_version"))
        if operation == "undo":
            nodes.edit_undo(document=document, user=request.user, expected_version=version)
        else:
            node = selectors.node_get(user=request.user, pk=node_id, document=document)
            result = _apply(request, operation, node, form, version)
            created = getattr(result, "created", None)
            selected = created[0] if operation == "group" and created else node.pk
    except OpenFableError as error:  # a refusal, or the model failing to write a summary (503)
        messages.error(request, str(error))
    else:
        messages.success(request, _DONE.get(operation, "Saved."))
    if request.htmx:
        return _detail(request, pk, node_id=selected)
    return redirect(f"{document.get_absolute_url()}?node={selected or ''}")


_DONE = {
    "update": "Saved; the node is being re-embedded.",
    "regenerate": "The model wrote a new summary; the node is being re-embedded.",
    "split": "Split in two.",
    "merge": "Merged with the next passage.",
    "move": "Moved.",
    "group": "Grouped into a new section.",
    "dissolve": "Dissolved; its parts moved up.",
    "exclude": "Excluded from retrieval.",
    "include": "Included in retrieval again.",
    "undo": "Undone.",
}


def _apply(request: HtmxHttpRequest, operation: str, node: Any, form: Any, version: int | None) -> Any:
    user = request.user
    if operation == "update":
        return nodes.node_update(
            node=node,
            title=form.get("title", ""),
            summary=form.get("summary", ""),
            user=user,
            expected_version=version,
        )
    if operation == "regenerate":
        return nodes.node_summary_regenerate(node=node, user=user, expected_version=version)
    if operation == "split":
        return nodes.node_split(
            node=node,
            position=_number(form.get("position"), "position"),
            snap=form.get("exact") != "on",
            user=user,
            expected_version=version,
        )
    if operation == "merge":
        return nodes.node_merge(node=node, user=user, expected_version=version)
    if operation == "move":
        parent = selectors.node_get(user=user, pk=form.get("parent"))
        position = _number(form.get("position"), "position") if form.get("position") else None
        return nodes.node_move(
            node=node, parent=parent, position=position, user=user, expected_version=version
        )
    if operation == "group":
        last = selectors.node_get(user=user, pk=form.get("last"))
        return nodes.nodes_group(
            first=node,
            last=last,
            title=form.get("title", ""),
            summary=form.get("summary", ""),
            user=user,
            expected_version=version,
        )
    if operation == "dissolve":
        return nodes.node_dissolve(node=node, user=user, expected_version=version)
    if operation in ("exclude", "include"):
        return nodes.node_exclude(
            node=node, excluded=operation == "exclude", user=user, expected_version=version
        )
    raise NotFoundError(f"There is no tree edit {operation!r}.")


def _number(raw: object, name: str) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise UserInputError(f"The {name} must be a whole number, not {raw!r}.") from None


def _version(raw: object) -> int | None:
    return int(str(raw)) if str(raw or "").isdecimal() else None
