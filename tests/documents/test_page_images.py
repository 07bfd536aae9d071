"""Page pictures (documents.page_images) under load: bounded memory and time, drawn once, a failure
remembered, a full house answered with 503 and Retry-After, and the user's request rate counted.

The PDF is written in the test: a 5 m square page with ``/UserUnit 75000`` (the issue's page:
six parallel requests took 62 s each and 7.9 GB together) and a 353 m one.
"""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from django.core.cache import caches
from django.core.files.base import ContentFile
from django.db import connection
from django.test import Client
from django.urls import reverse
from PIL import Image

from documents import page_images
from documents.models import Document
from tests.documents.ingestion import document_files as files
from tests.factories import CollectionFactory, DocumentFactory, UserFactory

# Page 1: the largest MediaBox the spec allows (14,400 points, 5 m) with /UserUnit 75000; at 1.5
# pixels per point it would be a 1.4 GB bitmap. Page 2: 1,000,000 points (353 m) square.
SIZES = [(14_400, 14_400), (1_000_000, 1_000_000)]
_GIGABYTE = 1024**3


def _pdf_document(owner: Any) -> Document:
    document: Document = DocumentFactory.create(
        collection=CollectionFactory.create(owner=owner),
        format=Document.Format.PDF,
        original=ContentFile(files.oversized_pdf(SIZES, user_unit=75_000), name="drawing.pdf"),
        content="Page one.\nPage two.",
        page_spans=[[1, 0, 10], [2, 10, 19]],
    )
    return document


def _signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@dataclass
class _Peak:
    # What the block added: this process's growth over its resident memory when the block began,
    # plus the children started in it. Not the process's whole size: after a thousand tests in one
    # process that alone can be most of a gigabyte, and it says nothing about drawing pages; nor
    # the children already running (the test broker, the real_llm tests' model server: 3.5 GB).
    bytes: int = 0
    drawing: int = 0  # child processes drawing (or reading) at once


def _is_drawing(process: psutil.Process) -> bool:
    # Not the test broker's redis-server, a child of this process too.
    try:
        return "documents.ingestion.extraction.isolated" in process.cmdline()
    except psutil.Error:
        return False


@contextmanager
def _peak_memory() -> Iterator[_Peak]:
    """The most memory the block added (see ``_Peak``), and drawing children, sampled every 10 ms while the block runs."""
    peak = _Peak()
    done = threading.Event()
    me = psutil.Process()
    before = me.memory_info().rss
    running = {process.pid for process in me.children(recursive=True)}

    def sample() -> None:
        while not done.is_set():
            children = [process for process in me.children(recursive=True) if process.pid not in running]
            total = max(0, me.memory_info().rss - before)
            for process in children:
                # A child that ended between the listing and the reading counts nothing.
                with contextlib.suppress(psutil.Error):
                    total += process.memory_info().rss
            peak.bytes = max(peak.bytes, total)
            peak.drawing = max(peak.drawing, sum(map(_is_drawing, children)))
            done.wait(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        yield peak
    finally:
        done.set()
        sampler.join()


def _at_once(count: int, ask: Callable[[], Any]) -> list[tuple[Any, float]]:
    """``ask()`` from ``count`` threads at once: each answer with its seconds."""
    start = threading.Barrier(count)

    def one() -> tuple[Any, float]:
        start.wait()
        began = time.monotonic()
        try:
            return ask(), time.monotonic() - began
        finally:
            connection.close()  # each thread's own database connection

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: one(), range(count)))


@pytest.fixture
def count_drawings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a page was handed to a child process to draw (one entry per drawing)."""
    drawn: list[int] = []
    draw = page_images.render_page_png_isolated

    def counted(source: Any, page: int, **options: Any) -> bytes:
        drawn.append(page)
        return draw(source, page, **options)

    monkeypatch.setattr(page_images, "render_page_png_isolated", counted)
    return drawn


@pytest.mark.django_db(transaction=True)  # the threads' connections must see the rows
def test_six_requests_at_once_for_a_huge_page_stay_under_a_gigabyte(
    file_storage: Path, settings: Any, count_drawings: list[int]
) -> None:
    settings.RENDER_CONCURRENCY = 2
    owner = UserFactory.create()
    document = _pdf_document(owner)
    url = reverse("documents:page-image", args=[document.pk, 1])

    def ask() -> Any:
        return _signed_in(owner).get(url)

    before = psutil.Process().memory_info().rss
    with _peak_memory() as peak:
        answers = _at_once(6, ask)
    statuses = sorted(response.status_code for response, _ in answers)
    slowest = max(seconds for _, seconds in answers)
    print(f"\nhuge page, before: {before / 2**20:.0f} MB")
    print(f"huge page, 6 at once: {statuses}, peak {peak.bytes / 2**20:.0f} MB, slowest {slowest:.2f} s")
    assert peak.bytes < _GIGABYTE
    assert slowest < settings.RENDER_SECONDS + page_images.SLOT_WAIT_SECONDS + 5
    # Drawn once, smaller (4,473 pixels square, the 20 million pixel budget), not 21,600 square; a
    # request that waited past SLOT_WAIT_SECONDS for it would be told to come back.
    assert count_drawings == [1]
    assert set(statuses) <= {200, 503} and 200 in statuses
    for response, _ in answers:
        if response.status_code == 200:
            picture = Image.open(io.BytesIO(b"".join(response.streaming_content)))
            assert picture.size == (4473, 4473)
        else:
            assert response["Retry-After"] == str(page_images.RETRY_AFTER_SECONDS)

    again = time.monotonic()
    assert ask().status_code == 200 and count_drawings == [1], "kept on disk, not drawn again"
    assert time.monotonic() - again < 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_six_huge_pages_at_once_are_drawn_two_at_a_time(
    file_storage: Path, settings: Any, count_drawings: list[int]
) -> None:
    settings.RENDER_CONCURRENCY = 2
    owner = UserFactory.create()
    urls = iter([reverse("documents:page-image", args=[_pdf_document(owner).pk, 1]) for _ in range(6)])

    def ask() -> Any:
        return _signed_in(owner).get(next(urls))

    with _peak_memory() as peak:
        answers = _at_once(6, ask)
    statuses = sorted(response.status_code for response, _ in answers)
    slowest = max(seconds for _, seconds in answers)
    print(
        f"\n6 documents' huge pages at once: {statuses}, peak {peak.bytes / 2**20:.0f} MB, "
        f"{peak.drawing} drawing at most, slowest {slowest:.2f} s"
    )
    assert peak.bytes < _GIGABYTE and peak.drawing <= 2
    assert slowest < settings.RENDER_SECONDS + page_images.SLOT_WAIT_SECONDS + 5
    # Those that found no free slot within SLOT_WAIT_SECONDS are told when to come back.
    assert set(statuses) <= {200, 503} and len(count_drawings) == statuses.count(200)
    for response, _ in answers:
        if response.status_code == 503:
            assert response["Retry-After"] == str(page_images.RETRY_AFTER_SECONDS)


@pytest.mark.django_db(transaction=True)
def test_a_page_too_large_to_draw_fails_once_and_is_remembered(
    file_storage: Path, settings: Any, count_drawings: list[int]
) -> None:
    owner = UserFactory.create()
    document = _pdf_document(owner)
    url = reverse("documents:page-image", args=[document.pk, 2])

    def ask() -> Any:
        return _signed_in(owner).get(url, headers={"Accept": "application/json"})

    with _peak_memory() as peak:
        answers = _at_once(6, ask)
    statuses = sorted(response.status_code for response, _ in answers)
    slowest = max(seconds for _, seconds in answers)
    print(f"\nabsurd page, 6 at once: {statuses}, peak {peak.bytes / 2**20:.0f} MB, slowest {slowest:.2f} s")
    assert peak.bytes < _GIGABYTE and slowest < settings.RENDER_SECONDS
    assert count_drawings == [2], "the five others take the first one's answer"
    assert set(statuses) <= {422, 503} and 422 in statuses
    refused = next(response for response, _ in answers if response.status_code == 422).json()["error"]
    assert refused["code"] == "page_not_drawn"
    assert refused["message"] == (
        "Page 2 could not be drawn: the page is 352.8 m x 352.8 m (1,000,000 x 1,000,000 points), "
        "too large to draw. The text beside it is complete."
    )

    again = time.monotonic()
    response = ask()
    print(f"asked again: {time.monotonic() - again:.3f} s")
    assert time.monotonic() - again < 0.5, "answered from the remembered failure"
    assert response.status_code == 422 and response.json()["error"] == refused
    assert count_drawings == [2]

    # Raised limits (an operator letting big pages through) try once more.
    settings.RENDER_MEMORY_MB *= 2
    assert ask().status_code == 422 and count_drawings == [2, 2]


@pytest.mark.django_db
def test_no_free_slot_answers_503_with_retry_after(
    file_storage: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.RENDER_CONCURRENCY = 1
    monkeypatch.setattr(page_images, "SLOT_WAIT_SECONDS", 0.2)
    owner = UserFactory.create()
    client = _signed_in(owner)
    url = reverse("documents:page-image", args=[_pdf_document(owner).pk, 1])
    slots = page_images._drawing_slots(1)
    assert slots.acquire(timeout=5)  # another request is drawing
    try:
        as_json = client.get(url, headers={"Accept": "application/json"})
        as_page = client.get(url)
    finally:
        slots.release()
    assert as_json.status_code == 503 and as_json["Retry-After"] == "5"
    assert as_json.json()["error"]["code"] == "pages_busy"
    assert (
        "drawing other pages right now (1 at a time); try again in 5 seconds"
        in (as_json.json()["error"]["message"])
    )
    assert as_page.status_code == 503 and as_page["Retry-After"] == "5"
    assert "try again in 5 seconds" in as_page.content.decode()
    assert not list((file_storage.parent / "page-images").rglob("*.failed")), "busy is not a failure"


@pytest.mark.django_db
def test_page_pictures_count_in_the_users_request_rate(file_storage: Path, settings: Any) -> None:
    owner = UserFactory.create()
    client = _signed_in(owner)
    url = reverse("documents:page-image", args=[_pdf_document(owner).pk, 2])
    settings.API_THROTTLE_RATES = {owner.get_username(): "2/minute"}
    caches["rate_limit"].clear()
    try:
        answers = [client.get(url) for _ in range(3)]
    finally:
        caches["rate_limit"].clear()
    assert [answer.status_code for answer in answers] == [422, 422, 429]
    assert int(answers[2]["Retry-After"]) > 0
