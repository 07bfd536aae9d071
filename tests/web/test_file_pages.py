"""The web app with files: the corpus page takes several files of any format at once, the
document page links the original and shows a selected node on its PDF pages, highlighted."""

from __future__ import annotations

import io
import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from PIL import Image

from documents.ingestion.extraction.pdf_pages import _keys
from documents.models import Document, Node
from documents.services.documents import document_create, document_delete
from documents.services.jobs import job_run_now
from tests.documents.ingestion import document_files as files
from tests.factories import CollectionFactory, UserFactory

pytestmark = pytest.mark.django_db


def _signed_in(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


def _indexed_pdf(owner: object, data: bytes) -> Document:
    collection = CollectionFactory.create(owner=owner)
    document = document_create(
        collection=collection, content=data, source_filename="report.pdf", queue=False
    ).document
    assert job_run_now(document_id=document.pk).succeeded  # type: ignore[union-attr]
    document.refresh_from_db()
    return document


def test_the_corpus_page_takes_a_pdf_a_word_file_and_a_page_at_once(file_storage: Path) -> None:
    owner = UserFactory.create()
    response = _signed_in(owner).post(
        reverse("documents:home"),
        {
            "uploads": [
                SimpleUploadedFile("report.pdf", files.report_pdf(pages=1)),
                SimpleUploadedFile("notes.docx", files.heading_docx()),
                SimpleUploadedFile("page.html", files.ARTICLE_PAGE),
            ]
        },
    )
    assert response.status_code == 302
    assert sorted(Document.objects.values_list("format", "status")) == [
        ("docx", "queued"),
        ("html", "queued"),
        ("pdf", "queued"),
    ]


def test_a_refused_file_in_a_batch_stores_none_and_keeps_no_file(file_storage: Path) -> None:
    owner = UserFactory.create()
    response = _signed_in(owner).post(
        reverse("documents:home"),
        {
            "uploads": [
                SimpleUploadedFile("report.pdf", files.report_pdf(pages=1)),
                SimpleUploadedFile("old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 64),
            ]
        },
    )
    assert response.status_code == 400 and "save it as .docx or PDF" in response.content.decode()
    assert not Document.objects.exists()
    assert not [path for path in file_storage.rglob("*") if path.is_file()]


def test_a_selected_node_is_shown_on_its_page_with_its_lines_marked(
    file_storage: Path, django_capture_on_commit_callbacks: Any
) -> None:
    owner = UserFactory.create()
    document = _indexed_pdf(owner, files.report_pdf(pages=3))
    node = Node.objects.get(document=document, title="2. Delivery of Goods")
    client = _signed_in(owner)
    page = client.get(f"{reverse('documents:detail', args=[document.pk])}?node={node.pk}").content.decode()
    assert reverse("documents:original", args=[document.pk]) in page and "3 pages" in page
    image_url = reverse("documents:page-image", args=[document.pk, 2])
    assert f'src="{image_url}"' in page
    boxes = [
        tuple(float(value) for value in match)
        for match in re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"/>', page)
    ]
    # The heading and the four body lines of page 2, top to bottom, none in the running header.
    assert len(boxes) == 5, boxes
    assert all(0.1 < top < 0.3 for _, top, _, _ in boxes) and boxes == sorted(boxes, key=lambda box: box[1])

    image = client.get(image_url)
    assert image.status_code == 200 and image["Content-Type"] == "image/png"
    picture = Image.open(io.BytesIO(b"".join(image.streaming_content)))  # type: ignore[attr-defined]
    assert picture.size == (893, 1263)
    assert any(path.name == "2.png" for path in (file_storage.parent / "page-images").rglob("*.png"))
    assert client.get(reverse("documents:page-image", args=[document.pk, 9])).status_code == 404

    with django_capture_on_commit_callbacks(execute=True):
        document_delete(document=document)
    assert not list((file_storage.parent / "page-images").rglob("*.png")), "its pages go with it"


def test_the_text_panel_shows_a_files_headings_without_their_marks(file_storage: Path) -> None:
    owner = UserFactory.create()
    document = _indexed_pdf(owner, files.report_pdf(pages=2))
    assert "\n## 2. Delivery of Goods\n" in document.content  # what the tree builders read
    node = Node.objects.get(document=document, title="2. Delivery of Goods")
    page = _signed_in(owner).get(f"{reverse('documents:detail', args=[document.pk])}?node={node.pk}")
    html = page.content.decode()
    panel = re.search(r'<div class="document-text"[^>]*>(.*?)</div>', html, re.DOTALL)
    assert panel is not None
    # Shown as a heading, its "## " in the page but hidden...
    assert (
        '<span class="heading-mark" aria-hidden="true">## </span>'
        '<strong class="heading-line">2. Delivery of Goods</strong>'
    ) in panel.group(1)
    shown = re.sub(r'<span class="heading-mark"[^>]*>.*?</span>', "", panel.group(1))
    assert not re.search(r"^#+ ", unescape(re.sub(r"<[^>]+>", "", shown)), re.MULTILINE)
    # ...so the panel's text is the stored text, character for character: the offsets the page's
    # scripts count (the split point, an answer's marks) are the document's.
    assert unescape(re.sub(r"<[^>]+>", "", panel.group(1))) == document.content
    selected = re.search(r'<mark id="selected-text"[^>]*>(.*?)</mark>', panel.group(1), re.DOTALL)
    assert selected is not None
    assert (
        unescape(re.sub(r"<[^>]+>", "", selected.group(1)))
        == document.content[node.start_char : node.end_char]
    )
    # An untitled passage in the outline is named by its opening words, without the marks.
    leaf = Node.objects.get(document=document, parent=node)
    assert not leaf.title and "2. Delivery of Goods The supplier" in html
    assert "## 2. Delivery of Goods The supplier" not in html


def test_pages_and_the_original_are_only_for_those_who_may_see_the_document(file_storage: Path) -> None:
    document = _indexed_pdf(UserFactory.create(), files.report_pdf(pages=1))
    stranger = _signed_in(UserFactory.create())
    assert stranger.get(reverse("documents:page-image", args=[document.pk, 1])).status_code == 404
    assert stranger.get(reverse("documents:original", args=[document.pk])).status_code == 404
    assert not (file_storage.parent / "page-images").exists(), "nothing drawn for a stranger"


def test_text_is_matched_on_letters_and_digits_only() -> None:
    keys, where = _keys("agree\ufffe\r\nment, “Fi­nal”")
    assert keys == "agreementfinal" and where[0] == 0 and where[5] == 8


def test_the_query_page_names_each_passages_pages(file_storage: Path) -> None:
    owner = UserFactory.create()
    _indexed_pdf(owner, files.report_pdf(pages=3))
    page = _signed_in(owner).get(
        reverse("retrieval:query"), {"query": "When does the buyer pay each invoice?", "budget": "150"}
    )
    assert page.status_code == 200
    assert re.search(r"· pages? \d(, \d)* · found by", page.content.decode())
