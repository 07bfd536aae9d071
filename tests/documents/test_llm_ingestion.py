"""The LLM builder over real HTTP: a scripted OpenAI-compatible server answers each prompt.

Every branch: good output, malformed JSON, missing chunk indexes, invented ids, markers not
found, 429 then success, a timeout, persistent invalid output (fallback to the structural
builder, with the reason on the job), and the cache that makes a re-index free.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pytest_django.fixtures import Settings as SettingsWrapper

from documents.ingestion.tree_schema import MARKER_MAX_CHARS
from documents.models import Document, IngestionJob, Node
from documents.services.documents import document_create, document_reindex
from documents.services.jobs import document_index, job_claim
from openfable.models import LLMCacheEntry
from tests.factories import CollectionFactory
from tests.fakes.llm import answers, reading
from tests.fakes.llm.server import LLAMA_CPP_RESPONSE_FORMATS, ScriptedOpenAIServer, delay, status

pytestmark = pytest.mark.django_db

TEXT = (
    "Volcanoes form where magma reaches the surface of the Earth.\n"
    "Most volcanoes sit along the boundaries of tectonic plates.\n"
    "Shield volcanoes have gentle slopes built by fluid lava flows.\n"
    "Stratovolcanoes are steep and erupt explosively from time to time.\n"
)
PARAGRAPHS = [line + "\n" for line in TEXT.split("\n") if line]


@pytest.fixture
def llm(scripted_llm: ScriptedOpenAIServer, settings: SettingsWrapper) -> Iterator[ScriptedOpenAIServer]:
    settings.LLM_MAX_RETRIES = 2
    settings.LLM_TREE_RETRIES = 2
    LLMCacheEntry.objects.all().delete()
    yield scripted_llm


def _ingest(text: str = TEXT) -> tuple[Document, IngestionJob]:
    result = document_create(
        collection=CollectionFactory.create(), content=text, title="Volcanoes", queue=False
    )
    return _run(result.document)


def _run(document: Document) -> tuple[Document, IngestionJob]:
    job = job_claim(document_id=document.pk)
    assert job is not None
    document_index(job=job)
    job.refresh_from_db()
    document.refresh_from_db()
    return document, job


def _leaf_texts(document: Document) -> list[str]:
    return list(
        Node.objects.filter(document=document, kind="leaf")
        .order_by("order")
        .values_list("content", flat=True)
    )


def _bad_then(bad: Any, good: Any = answers.simple_answer) -> Any:
    """First answer to the given schema is ``bad``; everything else is answered well."""
    state = {"sent": False}

    def reply(request: dict[str, Any]) -> Any:
        if not state["sent"] and reading.schema_name(request) == "document_tree":
            state["sent"] = True
            return bad(request) if callable(bad) else bad
        return good(request)

    return reply


def test_good_output_builds_the_llm_tree(llm: ScriptedOpenAIServer) -> None:
    llm.script_chat(answers.simple_answer, answers.simple_answer)
    document, job = _ingest()
    assert document.builder == Document.Builder.LLM and document.status == Document.Status.INDEXED
    assert _leaf_texts(document) == PARAGRAPHS
    titles = list(Node.objects.filter(document=document, kind="section").values_list("title", flat=True))
    assert titles == ["Opening part", "Closing part"]
    assert job.status == IngestionJob.Status.SUCCEEDED and job.llm_calls == 2
    assert job.llm_prompt_tokens > 0 and job.llm_completion_tokens > 0 and not job.fallback_reason
    prompt = llm.chat_requests[0]["messages"][-1]["content"]
    assert (
        "<untrusted_document>" in prompt
        and "ignore" in llm.chat_requests[0]["messages"][0]["content"].lower()
    )


def test_malformed_json_is_retried_with_the_error_fed_back(llm: ScriptedOpenAIServer) -> None:
    llm.script_chat(*[_bad_then("{not json at all")] * 3)
    document, job = _ingest()
    assert document.builder == Document.Builder.LLM
    retry = llm.chat_requests[2]["messages"][-1]["content"]
    assert "previous answer was invalid" in retry and "JSON" in retry
    assert job.llm_calls == 3


def test_missing_chunk_indexes_are_named_in_the_feedback(llm: ScriptedOpenAIServer) -> None:
    llm.script_chat(*[_bad_then(lambda request: answers.two_section_tree(request, chunks=[0, 1]))] * 3)
    document, _ = _ingest()
    assert document.builder == Document.Builder.LLM
    retry = llm.chat_requests[2]["messages"][-1]["content"]
    assert "missing" in retry and "2-3" in retry


def test_invented_chunk_ids_are_refused_and_retried(llm: ScriptedOpenAIServer) -> None:
    llm.script_chat(
        *[_bad_then(lambda request: answers.two_section_tree(request, chunks=[0, 1, 2, 3, 99]))] * 3
    )
    document, _ = _ingest()
    assert document.builder == Document.Builder.LLM
    assert "99" in llm.chat_requests[2]["messages"][-1]["content"]
    assert _leaf_texts(document) == PARAGRAPHS


def test_markers_not_found_are_retried_with_the_offset(llm: ScriptedOpenAIServer) -> None:
    llm.script_chat(
        {"markers": ["Volcanoes form where", "Lava lakes glow at night"]},
        answers.simple_answer,
        answers.simple_answer,
    )
    document, _ = _ingest()
    assert document.builder == Document.Builder.LLM
    retry = llm.chat_requests[1]["messages"][-1]["content"]
    assert "Lava lakes glow at night" in retry and "after character" in retry


def test_rate_limit_then_success(llm: ScriptedOpenAIServer) -> None:
    llm.script_chat(status(429), answers.simple_answer, answers.simple_answer)
    document, job = _ingest()
    assert document.builder == Document.Builder.LLM
    assert len(llm.chat_requests) == 3 and job.llm_calls == 2


def test_a_timeout_falls_back_to_the_structural_builder_and_says_why(
    llm: ScriptedOpenAIServer, settings: SettingsWrapper
) -> None:
    settings.LLM_TIMEOUT = 0.5
    settings.LLM_MAX_RETRIES = 1
    llm.script_chat(delay(2.0), delay(2.0))
    document, job = _ingest()
    assert document.builder == Document.Builder.STRUCTURAL and document.status == Document.Status.INDEXED
    assert "Fell back to the structural builder" in job.fallback_reason
    assert "timed out" in job.fallback_reason.lower() or "timeout" in job.fallback_reason.lower()
    assert "".join(_leaf_texts(document)) == TEXT


def test_persistently_invalid_trees_fall_back_after_the_retries(llm: ScriptedOpenAIServer) -> None:
    def always_bad(request: dict[str, Any]) -> Any:
        if reading.schema_name(request) == "document_tree":
            return {"title": "", "summary": "", "sections": []}
        return answers.simple_answer(request)

    llm.script_chat(*[always_bad] * 4)
    document, job = _ingest()
    assert document.builder == Document.Builder.STRUCTURAL
    assert "tree of part 1 still invalid after 3 attempts" in job.fallback_reason
    assert job.llm_calls == 4


def test_reindexing_unchanged_text_costs_nothing(llm: ScriptedOpenAIServer) -> None:
    llm.script_chat(answers.simple_answer, answers.simple_answer)
    document, _ = _ingest()
    requests_before = len(llm.chat_requests)
    document_reindex(document=document, queue=False)
    document, job = _run(document)
    assert len(llm.chat_requests) == requests_before, "every answer came from the cache"
    assert job.llm_calls == job.llm_cached_calls == 2 and job.llm_prompt_tokens == 0
    assert document.builder == Document.Builder.LLM


@pytest.mark.slow
def test_a_long_document_goes_in_windows_and_parts_merged_under_one_root(
    llm: ScriptedOpenAIServer, settings: SettingsWrapper
) -> None:
    # An unknown model: the client falls back to OPENFABLE_LLM_CONTEXT_WINDOW, kept small here
    # so a modest text needs several chunking windows and several tree parts.
    settings.LLM_CONTEXT_WINDOW = 2048
    paragraphs = [
        f"Paragraph {n} explains topic number {n} in plain words, with a detail about item {n * 7}.\n"
        for n in range(120)
    ]
    text = "".join(paragraphs)
    llm.script_chat(*[answers.simple_answer] * 40)
    document, job = _ingest(text)
    names = [reading.schema_name(request) for request in llm.chat_requests]
    assert names.count("chunk_markers") >= 2, "several overlapping windows"
    assert names.count("document_tree") >= 2, "several parts"
    assert names.count("document_root") == 1, "one root written from the parts"
    assert document.builder == Document.Builder.LLM, job.fallback_reason
    assert _leaf_texts(document) == paragraphs, "windows merged with no duplicate and no gap"
    root = Node.objects.get(document=document, kind="root")
    assert root.title == "Merged document"
    assert Node.objects.filter(document=document, depth=1).count() == names.count("document_tree")


_WORDS = st.sampled_from(["alpha", "beta", "gamma", "delta", "Ω-zeta", "the", "of", "2.3", "Ltd.", "naïve"])
_LINES = st.lists(st.lists(_WORDS, min_size=1, max_size=12), min_size=1, max_size=14)


@hypothesis_settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=_LINES, data=st.data())
@pytest.mark.slow
def test_llm_leaves_partition_the_text_exactly(
    llm: ScriptedOpenAIServer, lines: list[list[str]], data: Any
) -> None:
    separators = data.draw(st.lists(st.sampled_from([" ", "  ", "\t", " \n"]), min_size=200, max_size=200))
    text = "\n".join(
        "".join(word + separators[(i + j) % 200] for j, word in enumerate(words)).rstrip()
        for i, words in enumerate(lines)
    )
    if not text.strip():
        return
    starts = sorted(set(data.draw(st.lists(st.integers(0, len(lines) - 1), max_size=len(lines)))) | {0})
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=len(lines), max_size=len(lines)))

    def markers(request: dict[str, Any]) -> dict[str, Any]:
        return {"markers": [" ".join(lines[i][:3]) for i in starts]}  # single spaces: tolerant search

    def tree(request: dict[str, Any]) -> dict[str, Any]:
        count, sections, cursor = reading.chunk_count(request), [], 0
        for size in sizes:
            if cursor >= count:
                break
            chunk_ids = list(range(cursor, min(count, cursor + size)))
            sections.append({"title": f"S{cursor}", "summary": "s", "chunks": chunk_ids, "sections": []})
            cursor += size
        if cursor < count:
            sections.append(
                {"title": "Rest", "summary": "r", "chunks": list(range(cursor, count)), "sections": []}
            )
        return {"title": "T", "summary": "t", "sections": sections}

    LLMCacheEntry.objects.all().delete()
    llm.script_chat(markers, tree)
    document, job = _ingest(text)
    leaves = list(Node.objects.filter(document=document, kind="leaf").order_by("order"))
    assert "".join(leaf.content for leaf in leaves) == text
    assert [leaf.start_char for leaf in leaves] == [0] + [leaf.end_char for leaf in leaves[:-1]]
    assert document.builder == Document.Builder.LLM, job.fallback_reason


def test_a_llama_cpp_server_builds_the_llm_tree_with_one_refused_request(
    settings: SettingsWrapper,
) -> None:
    """llama-cpp-python refuses json_schema (HTTP 500): the first call learns json_object, every
    later one (the tree, the next document) goes straight to it; no structural fallback."""
    with ScriptedOpenAIServer(response_formats=LLAMA_CPP_RESPONSE_FORMATS) as server:
        settings.LLM_MODEL = "smollm2"
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_MAX_RETRIES = 4  # the default: a doomed call used to make five requests
        settings.LLM_RETRY_BASE_DELAY = 1.0
        LLMCacheEntry.objects.all().delete()
        server.chat_default = answers.simple_answer
        document, job = _ingest()
        other, other_job = _ingest(TEXT.replace("Volcanoes", "Large volcanoes"))

    for built, built_job in ((document, job), (other, other_job)):
        assert built.builder == Document.Builder.LLM, built_job.fallback_reason
        assert not built_job.fallback_reason and built_job.llm_calls == 2
    assert _leaf_texts(document) == PARAGRAPHS
    titles = list(Node.objects.filter(document=document, kind="section").values_list("title", flat=True))
    assert titles == ["Opening part", "Closing part"]
    formats = [(body.get("response_format") or {}).get("type") for body in server.chat_requests]
    assert formats == ["json_schema"] + ["json_object"] * 4, "one refused request for the model"
    # The grammar llama.cpp makes of the schema ends a rambling answer at its length bounds;
    # strict structured output is asked without them (not every provider takes them).
    refused, first_grammar = server.chat_requests[:2]
    strict = json.dumps(refused["response_format"]["json_schema"]["schema"])
    assert "maxItems" not in strict and "minLength" not in strict
    markers = first_grammar["response_format"]["schema"]["properties"]["markers"]
    assert markers["maxItems"] == len(TEXT.split()) // 75 + 2
    assert markers["items"]["maxLength"] == MARKER_MAX_CHARS
    assert [reading.schema_name(body) for body in server.chat_requests] == [
        "chunk_markers",
        "chunk_markers",
        "document_tree",
        "chunk_markers",
        "document_tree",
    ]
