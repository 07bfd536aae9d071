"""`python -m fable_benchmarks bench-local-models`: which local model follows the engine's prompts.

The local models ``OPENFABLE_LLM=local`` can serve (``openfable.local_llm.MODELS``) are compared on
the same fixed requests, made by the product's own prompt builders:

1. Recorded: against the scripted model (``tests.fakes.llm``, which answers every prompt validly),
   the ``documents`` shortest documents of each dataset are indexed with the structural builder,
   then ``queries`` of its queries whose gold documents are among them run in ``bipath`` mode
   (each one LLMselect and one LLMnavigate prompt, at ``OPENFABLE_LLM=local``'s prompt allowance),
   the root summary of its first document is rewritten (a summary prompt), and that document is
   indexed again with the LLM builder (its first chunk-marker prompt is kept). The requests the
   server received are the probes: messages, schema and the answer cap the product sets.
2. Replayed: each model is served as ``OPENFABLE_LLM=local`` serves it (``local_llm.server_command``
   and ``server_environment``, ``OPENFABLE_LOCAL_LLM_THREADS`` threads), and every probe is sent
   once through the product's client (no cache, no retry), which negotiates the response format
   with llama-cpp-python as the product does. ``--base-url`` measures a server already running
   instead (the tests give the scripted one).

Per model and per kind of prompt: the share of answers that are JSON the product's parser accepts,
the share in the shape asked for (``parse_scores``, the markers list, ``summary_from_answer``; an
LLMselect or LLMnavigate answer cut off at its cap counts when its complete items are, as the
product reads them: ``read_cut_off_answer``), the share of the ids (or chunk markers) named that the prompt offered (or that stand verbatim in the
text): instruction following; answer tokens; seconds per call (p50 and max).
"""

from __future__ import annotations

import re
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.test import override_settings
from django.utils import timezone

from documents.ingestion.boundaries import MarkerNotFoundError, locate_markers
from documents.ingestion.prompts import DOCUMENT_TAG
from documents.ingestion.tree_schema import MarkerAnswerError, parse_marker_answer
from documents.models import Document, Node
from documents.services.collections import collection_create, collection_delete
from documents.services.documents import document_reindex
from documents.services.jobs import job_run_now
from documents.services.nodes.summary import SummaryModelError, node_summary_regenerate, summary_from_answer
from fable_benchmarks import BenchInputError
from fable_benchmarks.cost_real import (
    add_dataset_document,
    local_model_choice,
    local_model_server,
    shortest_documents,
)
from fable_benchmarks.datasets import read_queries
from openfable.celery import app
from openfable.llm import LLMClient, LLMConfig, LLMError, LLMOutputError
from openfable.llm_endpoints import forget_endpoints
from openfable.models import LLMCacheEntry
from retrieval.paths.llm import LLMAnswerError, parse_scores, read_cut_off_answer, scores_schema
from retrieval.services import retrieve
from tests.fakes.llm.model import FableModelServer

Log = Callable[[str], None]

# The kinds of probe, by the schema the product names in its request, in the table's order.
KINDS = {
    "document_selection": "LLMselect",
    "node_selection": "LLMnavigate",
    "chunk_markers": "chunk markers",
    "node_summary": "summary",
}
_SCORE_KEYS = {"document_selection": "documents", "node_selection": "nodes"}
_OFFERED = {
    "document_selection": re.compile(r"<document id=(\d+)>"),
    "node_selection": re.compile(r"\[node (\d+)\]"),
}
_FENCED = re.compile(rf"<{DOCUMENT_TAG}>\n(.*)\n</{DOCUMENT_TAG}>", re.DOTALL)
LOCAL_QUERY_TOKENS = 3000  # OPENFABLE_RETRIEVAL_LLM_QUERY_TOKENS's default under OPENFABLE_LLM=local
REPLAY_TIMEOUT_S = 180.0
_KEPT = 400  # characters of each answer kept in the report  # OPENFABLE_LLM_TIMEOUT's default under OPENFABLE_LLM=local


@dataclass(frozen=True)
class Probe:
    """One request the product made: what is sent again to each model."""

    schema_name: str
    messages: list[dict[str, str]]
    schema: dict[str, Any]
    max_tokens: int | None

    @property
    def kind(self) -> str:
        return KINDS[self.schema_name]

    def offered(self) -> set[int]:
        """The ids the prompt showed (LLMselect, LLMnavigate)."""
        pattern = _OFFERED[self.schema_name]
        return {int(found) for found in pattern.findall(self.messages[-1]["content"])}

    def source(self) -> str:
        """The text the chunk markers must be copied from: the prompt's fenced window."""
        found = _FENCED.search(self.messages[-1]["content"])
        return found.group(1) if found else ""


@dataclass
class Answer:
    """One model's answer to one probe, judged."""

    kind: str
    seconds: float
    completion_tokens: int = 0
    valid_json: bool = False
    shaped: bool = False
    named: int = 0  # ids (markers) the answer named
    offered: int = 0  # of those, ids the prompt offered (markers found verbatim in the text)
    error: str = ""
    text: str = ""  # the start of what the model said (--json keeps it)


@dataclass
class _Recording:
    probes: list[Probe] = field(default_factory=list)


# -- the command ---------------------------------------------------------------------------------


def bench_local_models(
    *,
    datasets: Sequence[tuple[Path, Path]],
    models: Sequence[str],
    documents: int = 3,
    queries: int = 2,
    budget: int = 2000,
    base_url: str = "",
    log: Log | None = None,
) -> dict[str, Any]:
    """``datasets``: (documents JSONL, queries JSONL) pairs; ``models``: names in ``MODELS`` (with
    ``base_url``: the one name the server there answers to)."""
    say: Log = log or (lambda message: None)
    chosen = [local_model_choice(name, flag="--models") for name in models] if not base_url else list(models)
    started = timezone.now()
    try:
        probes = record_probes(datasets, documents=documents, queries=queries, budget=budget, say=say)
        report: dict[str, Any] = {
            "probes": {kind: sum(p.kind == kind for p in probes) for kind in KINDS.values()},
            "models": [],
        }
        for name in chosen:
            report["models"].append(_measure(name, probes, base_url=base_url, say=say))
    finally:
        LLMCacheEntry.objects.filter(created_at__gte=started).delete()
    return report


def record_probes(
    datasets: Sequence[tuple[Path, Path]], *, documents: int, queries: int, budget: int, say: Log
) -> list[Probe]:
    """The requests the product makes (see the module docstring), recorded against the scripted
    model: per dataset ``2 * queries`` query prompts, one summary and one chunk-marker prompt."""
    model = f"bench-local-models-{uuid.uuid4().hex[:8]}"
    with (
        FableModelServer(model=model) as server,
        override_settings(
            LLM_MODEL=model,
            LLM_BASE_URL=server.base_url,
            LLM_API_KEY="",
            RETRIEVAL_LLM_QUERY_TOKENS=LOCAL_QUERY_TOKENS,
        ),
    ):
        forget_endpoints()
        recording = _Recording()
        # The rewritten summary is re-embedded by a task: run here, not sent to a broker.
        eager, app.conf.task_always_eager = app.conf.task_always_eager, True
        try:
            for docs, queries_path in datasets:
                mark = len(server.chat_requests)
                _exercise(docs, queries_path, documents=documents, queries=queries, budget=budget, say=say)
                _keep(recording, server.chat_requests[mark:], queries=queries)
        finally:
            app.conf.task_always_eager = eager
    forget_endpoints()
    return recording.probes


def _exercise(docs: Path, queries_path: Path, *, documents: int, queries: int, budget: int, say: Log) -> None:
    items = shortest_documents(docs, documents)
    collection = collection_create(name=f"bench-local-models {docs.stem} {uuid.uuid4().hex[:6]}")
    try:
        by_doc_id: dict[Any, Document] = {}
        for item in items:
            created = add_dataset_document(collection, item, builder=Document.Builder.STRUCTURAL)
            if job_run_now(document_id=created.document.pk) is None:
                raise BenchInputError(f"document {item.doc_id} had no ingestion job to run")
            by_doc_id[item.doc_id] = created.document
        if not by_doc_id:
            raise BenchInputError(f"{docs}: no documents")
        picked = [q for q in read_queries(queries_path) if set(q.doc_ids) & set(by_doc_id)][:queries]
        for query in picked:
            retrieve(
                query=query.text,
                token_budget=budget,
                mode="bipath",
                collection=collection.pk,
                use_cache=False,
            )
        first = next(iter(by_doc_id.values()))
        try:
            node_summary_regenerate(node=Node.objects.get(document=first, parent=None))
        except SummaryModelError as error:
            raise BenchInputError(f"the scripted model's summary was refused: {error}") from error
        document_reindex(document=first, builder=Document.Builder.LLM, queue=False)
        job_run_now(document_id=first.pk)
        say(f"{docs.name}: {len(by_doc_id)} documents, {len(picked)} queries recorded")
    finally:
        collection_delete(collection=collection)


def _keep(recording: _Recording, requests: Sequence[Any], *, queries: int) -> None:
    """The first of each kind that the plan asks for, per dataset."""
    wanted = {"document_selection": queries, "node_selection": queries, "chunk_markers": 1, "node_summary": 1}
    for request in requests:
        response_format = request.get("response_format") or {}
        named = response_format.get("json_schema") or {}
        name = str(named.get("name", ""))
        if wanted.get(name, 0) <= 0:
            continue
        wanted[name] -= 1
        recording.probes.append(
            Probe(
                schema_name=name,
                messages=[dict(message) for message in request["messages"]],
                schema=dict(named.get("schema") or {}),
                max_tokens=request.get("max_tokens"),
            )
        )


# -- the replay ----------------------------------------------------------------------------------


def _measure(name: str, probes: Sequence[Probe], *, base_url: str, say: Log) -> dict[str, Any]:
    alias = name if base_url else f"{name}-compare-{uuid.uuid4().hex[:8]}"
    serving = nullcontext(base_url) if base_url else local_model_server(name, alias, say)
    with serving as url:
        forget_endpoints()
        client = LLMClient(
            LLMConfig(
                model=alias,
                base_url=url,
                timeout_s=REPLAY_TIMEOUT_S,
                max_retries=0,
                max_concurrency=1,
                breaker_threshold=0,
            )
        )
        answers = []
        for number, probe in enumerate(probes, start=1):
            answer = ask(client, probe)
            say(f"{name} {number}/{len(probes)} {probe.kind}: {answer.seconds:.1f} s {answer.error}")
            answers.append(answer)
    forget_endpoints()
    return {"model": name, "answers": [vars(answer) for answer in answers], **summarise(answers)}


def ask(client: LLMClient, probe: Probe) -> Answer:
    """``probe`` sent once; the answer judged as the product would judge it."""
    started = time.perf_counter()
    try:
        result = client.complete_json(
            probe.messages,
            schema=probe.schema,
            # as the product asks: the ids the outline shows are not listed again in the prompt
            prompt_schema=scores_schema(_SCORE_KEYS[probe.schema_name])
            if probe.schema_name in _SCORE_KEYS
            else None,
            schema_name=probe.schema_name,
            purpose=f"bench {probe.kind}",
            max_tokens=probe.max_tokens,
        )
    except LLMOutputError as error:
        seconds = time.perf_counter() - started
        answer = Answer(
            probe.kind, seconds, error.completion_tokens, error="not JSON", text=error.text[:_KEPT]
        )
        key = _SCORE_KEYS.get(probe.schema_name)
        cut_off = read_cut_off_answer(error, key=key) if key else None
        if cut_off is not None:  # the product reads the complete items of a cut-off answer
            answer.error = "cut off, complete items read"
            judge(probe, cut_off, answer)
        return answer
    except LLMError as error:
        return Answer(probe.kind, time.perf_counter() - started, error=f"failed: {error}"[:200])
    answer = Answer(
        probe.kind,
        time.perf_counter() - started,
        result.completion_tokens,
        valid_json=True,
        text=result.text[:_KEPT],
    )
    judge(probe, result.data, answer)
    return answer


def judge(probe: Probe, data: Any, answer: Answer) -> None:
    """Shape and instruction following of a parsed answer, into ``answer``."""
    if probe.schema_name in _SCORE_KEYS:
        offered = probe.offered()
        try:
            scores = parse_scores(data, key=_SCORE_KEYS[probe.schema_name], offered=offered)
        except LLMAnswerError:
            answer.error = "wrong shape"
            return
        answer.shaped = True
        answer.named = len(data[_SCORE_KEYS[probe.schema_name]])
        answer.offered = answer.named - scores.dropped_ids
    elif probe.schema_name == "chunk_markers":
        try:
            markers = parse_marker_answer(data)
        except MarkerAnswerError:
            answer.error = "wrong shape"
            return
        answer.shaped = True
        answer.named = len(markers)
        answer.offered = sum(_verbatim(probe.source(), marker) for marker in markers)
    else:
        try:
            summary_from_answer(data)
        except SummaryModelError:
            answer.error = "wrong shape"
            return
        answer.shaped = True


def _verbatim(text: str, marker: str) -> bool:
    try:
        locate_markers(text, [marker])
    except MarkerNotFoundError:
        return False
    return True


def summarise(answers: Sequence[Answer]) -> dict[str, Any]:
    """The table's numbers: over every answer, and per kind of prompt."""
    by_kind = {kind: [a for a in answers if a.kind == kind] for kind in KINDS.values()}
    return {
        "all": _shares(answers),
        "by_kind": {kind: _shares(rows) for kind, rows in by_kind.items() if rows},
    }


def _shares(answers: Sequence[Answer]) -> dict[str, Any]:
    count = len(answers) or 1
    seconds = [a.seconds for a in answers] or [0.0]
    tokens = [a.completion_tokens for a in answers] or [0]
    return {
        "calls": len(answers),
        "valid_json": round(sum(a.valid_json for a in answers) / count, 3),
        "shaped": round(sum(a.shaped for a in answers) / count, 3),
        **_offered_share(answers),
        "answer_tokens_mean": round(sum(tokens) / count, 1),
        "answer_tokens_max": max(tokens),
        "seconds_p50": round(statistics.median(seconds), 1),
        "seconds_max": round(max(seconds), 1),
    }


def _offered_share(answers: Sequence[Answer]) -> dict[str, Any]:
    """Of the ids (markers) named, the share offered (None: none named)."""
    named = sum(a.named for a in answers)
    offered = sum(a.offered for a in answers)
    return {"offered": round(offered / named, 3) if named else None, "named": named}
