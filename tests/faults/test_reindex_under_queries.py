"""A document re-indexed again and again while threads query it without pause.

A document's text never changes (a different text is a different document), so each re-index
switches the builder instead: the structural builder and the LLM builder (a scripted model over
real HTTP that cuts at every line) make trees that differ in node ids, boundaries and titles.
Every answer the retrieval service gives meanwhile must come from one tree, whole: each chunk's
node id, offsets, kind and toc path those of a node of the same version, never nodes of two
versions together, and never an empty answer. Real jobs (``job_run_now``), the real
``retrieve()``, the test database, several threads with their own connections.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.db import connections
from pytest_django.fixtures import Settings as SettingsWrapper

from documents.models import Document, Node
from documents.services.documents import document_create, document_reindex
from documents.services.jobs import job_run_now
from openfable.embeddings import LOCAL_DIMENSIONS, get_embedder
from retrieval.services import retrieve
from tests.factories import CollectionFactory
from tests.fakes.llm import answers
from tests.fakes.llm.server import ScriptedOpenAIServer

pytestmark = [pytest.mark.faults, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TEXT = "".join(
    f"Article {n}. The tenant of unit {n} pays {n * 40 + 300} euros on the first day of each month; "
    f"late rent costs {n % 5 + 1} percent a week, and the landlord repairs the heating of unit {n} "
    f"within {n % 3 + 2} days of a written request.\n"
    for n in range(24)
)
QUERY_THREADS = 3
REINDEXES = 4
BUILDERS = ("llm", "structural")  # alternately, starting from a structural tree


@dataclass(frozen=True)
class Answer:
    started: float
    finished: float
    chunks: tuple[tuple[int | None, int, int, str, str], ...]  # node id, start, end, kind, toc path


@pytest.fixture
def model_server(settings: SettingsWrapper) -> Iterator[ScriptedOpenAIServer]:
    """The scripted server as the embedding endpoint (fast, deterministic vectors) and as a model
    that answers every ingestion prompt well (the LLM builder is only used when a job asks)."""
    with ScriptedOpenAIServer(embedding_dimensions=LOCAL_DIMENSIONS) as server:
        server.chat_default = answers.simple_answer
        settings.LLM_MODEL = "scripted-model"
        settings.LLM_BASE_URL = server.base_url
        settings.EMBEDDING_URL = server.base_url
        settings.EMBEDDING_MODEL = "scripted-embedding"
        settings.EMBEDDING_DIMENSIONS = LOCAL_DIMENSIONS
        get_embedder.cache_clear()
        try:
            yield server
        finally:
            get_embedder.cache_clear()


def _version(document: Document) -> dict[int, tuple[int, int, str, str]]:
    return {
        pk: (start, end, kind, toc_path)
        for pk, start, end, kind, toc_path in Node.objects.filter(document=document).values_list(
            "pk", "start_char", "end_char", "kind", "toc_path"
        )
    }


def _query_until(stop: threading.Event, document: Document, answers: list[Answer], errors: list[str]) -> None:
    try:
        while not stop.is_set():
            started = time.monotonic()
            result = retrieve(
                query="who repairs the heating and how late can rent be",
                token_budget=150,  # a few passages: the node level runs, not the whole document
                mode="vector",
                documents=[document.pk],
                use_cache=False,
            )
            chunks = tuple(
                (chunk.node_id, chunk.start_char, chunk.end_char, chunk.kind, chunk.toc_path)
                for chunk in result.chunks
            )
            answers.append(Answer(started, time.monotonic(), chunks))
    except Exception as error:  # reported by the main thread, which owns the assertions
        errors.append(f"{type(error).__name__}: {error}")
    finally:
        connections.close_all()  # this thread's connection, before the test database is flushed


def test_every_answer_during_reindexes_comes_from_one_whole_tree(model_server: ScriptedOpenAIServer) -> None:
    document = document_create(
        collection=CollectionFactory.create(), content=TEXT, title="Lease", builder="structural", queue=False
    ).document
    first = job_run_now(document_id=document.pk)
    assert first is not None and first.succeeded
    versions = [_version(document)]
    swaps: list[float] = []

    stop = threading.Event()
    answers: list[Answer] = []
    errors: list[str] = []
    threads = [
        threading.Thread(target=_query_until, args=(stop, document, answers, errors), daemon=True)
        for _ in range(QUERY_THREADS)
    ]
    for thread in threads:
        thread.start()
    try:
        for number in range(REINDEXES):
            time.sleep(0.3)  # answers from the settled tree too
            document_reindex(document=document, builder=BUILDERS[number % 2], queue=False)
            run = job_run_now(document_id=document.pk)
            assert run is not None and run.succeeded, run and run.job.error
            swaps.append(time.monotonic())
            versions.append(_version(document))
        time.sleep(0.3)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not errors, errors[:3]

    document.refresh_from_db()
    assert document.builder == Document.Builder.STRUCTURAL and document.status == Document.Status.INDEXED
    for older, newer in itertools.pairwise(versions):
        assert not older.keys() & newer.keys(), "each re-index makes new nodes"
        assert {v[:3] for v in older.values()} != {v[:3] for v in newer.values()}, "and a different tree"
    assert Node.objects.count() == len(versions[-1]), "no node of an older tree is left"

    seen: list[int] = []
    for answer in answers:
        assert answer.chunks, "an answer is never empty"
        matching = [
            index
            for index, version in enumerate(versions)
            if all(node_id in version and version[node_id] == tuple(rest) for node_id, *rest in answer.chunks)
        ]
        assert len(matching) == 1, f"an answer mixes trees or matches none: {answer.chunks}"
        seen.append(matching[0])
    overlapping = sum(any(a.started < swap < a.finished for swap in swaps) for a in answers)
    print(
        f"{len(answers)} answers, {overlapping} of them in flight across a tree swap; versions seen: {sorted(set(seen))}"
    )
    assert set(seen) == set(range(len(versions))), "every tree served some answers"
