"""The LangChain and LlamaIndex retrievers of ``openfable_client``, with the real frameworks,
against a live server over real HTTP: passages best first, their documents (title, file, tags,
metadata, the original's URL), offsets and pages; sync and async; and every refusal as one
exception with the server's code and message."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from llama_index.core.schema import NodeRelationship, TextNode

from openfable_client import OpenFableClient, OpenFableError, QueryOptions
from openfable_client import langchain as of_langchain
from openfable_client import llamaindex as of_llamaindex
from tests.documents.ingestion import document_files as files
from tests.integrations.conftest import Person
from tests.mcp_server.conftest import GUIDE

pytestmark = pytest.mark.slow

QUESTION = "When does the buyer pay each invoice?"


class Corpus:
    def __init__(self, live_url: str, person: Person) -> None:
        self.url, self.key = live_url, person.key
        self.http = httpx.Client(
            base_url=f"{live_url}/v1/api", headers={"Authorization": f"Bearer {person.key}"}
        )
        self.pdf_bytes = files.report_pdf(pages=3)
        pdf = self.http.post(
            "/documents",
            params={"wait": "true"},
            data={"collection": "volcanoes", "tags": ["contracts"], "metadata": '{"client": "ACME"}'},
            files={"file": ("supply.pdf", self.pdf_bytes, "application/pdf")},
            timeout=180,
        )
        text = self.http.post(
            "/documents",
            params={"wait": "true"},
            json={"text": GUIDE, "title": "Guide", "collection": "volcanoes"},
            timeout=180,
        )
        assert pdf.status_code == 201 and text.status_code == 201, (pdf.text, text.text)
        self.pdf, self.text = pdf.json()["document"], text.json()["document"]

    def content(self, document_id: int) -> str:
        return str(self.http.get(f"/documents/{document_id}").json()["content"])


@pytest.fixture
def corpus(live_url: str, person: Person, eager_tasks: None, file_storage: Path) -> Corpus:
    return Corpus(live_url, person)


def test_langchain_retriever_sync_and_async(corpus: Corpus) -> None:
    retriever = of_langchain.OpenFableRetriever(base_url=corpus.url, token=corpus.key, top_k=3)
    found = retriever.invoke(QUESTION)
    assert asyncio.run(retriever.ainvoke(QUESTION)) == found
    assert 1 <= len(found) <= 3
    scores = [document.metadata["score"] for document in found]
    assert scores == sorted(scores, reverse=True)
    best = found[0]
    assert best.metadata["document_id"] == corpus.pdf["id"] and best.metadata["pages"]
    assert best.metadata["source_filename"] == "supply.pdf" and best.metadata["tags"] == ["contracts"]
    assert best.metadata["document_metadata"] == {"client": "ACME"}
    text = corpus.content(best.metadata["document_id"])
    assert best.page_content == text[best.metadata["start_char"] : best.metadata["end_char"]]
    assert best.id == f"openfable-node-{best.metadata['node_id']}"
    # The original, from the link the passage carries: the uploaded bytes.
    original = corpus.http.get(best.metadata["original"])
    assert best.metadata["original"].startswith(corpus.url) and original.content == corpus.pdf_bytes

    # A budget instead of a count, in reading order.
    budgeted = of_langchain.OpenFableRetriever(
        base_url=corpus.url, token=corpus.key, token_budget=4000, order="document"
    ).invoke(QUESTION)
    assert sum(len(document.page_content) for document in budgeted) > sum(len(d.page_content) for d in found)
    positions = [(document.metadata["document_id"], document.metadata["start_char"]) for document in budgeted]
    assert [document.metadata["position"] for document in budgeted] == list(range(len(budgeted)))
    assert len(set(positions)) == len(positions)


def test_llamaindex_retriever_sync_and_async(corpus: Corpus) -> None:
    retriever = of_llamaindex.OpenFableRetriever(
        base_url=corpus.url, token=corpus.key, top_k=2, collection="volcanoes", document_tags=["contracts"]
    )
    hits = retriever.retrieve(QUESTION)
    again = asyncio.run(retriever.aretrieve(QUESTION))
    assert [hit.node.node_id for hit in again] == [hit.node.node_id for hit in hits]
    assert len(hits) == 2 and hits[0].score is not None and hits[1].score is not None
    assert hits[0].score >= hits[1].score
    text = corpus.content(corpus.pdf["id"])
    for hit in hits:
        node = hit.node
        assert isinstance(node, TextNode)
        assert node.start_char_idx is not None and node.end_char_idx is not None
        assert node.get_content() == text[node.start_char_idx : node.end_char_idx]
        assert node.metadata["pages"] and node.metadata["title"]
        source = node.relationships[NodeRelationship.SOURCE]
        assert source.node_id == f"openfable-document-{corpus.pdf['id']}"  # type: ignore[union-attr]
        assert source.metadata["source_filename"] == "supply.pdf"  # type: ignore[union-attr]
    # What an LLM reads with the text: the section path and pages, not the ids and URLs.
    shown = hits[0].node.get_content(metadata_mode="llm")  # type: ignore[arg-type]
    assert "pages" in shown and "original" not in shown


@pytest.mark.parametrize(
    ("options", "code", "status", "words"),
    [
        (
            QueryOptions(top_k=3, token_budget=500),
            "invalid_input",
            400,
            "Send token_budget or top_k, not both",
        ),
        (QueryOptions(top_k=500), "invalid_input", 400, "top_k must be a whole number"),
        (QueryOptions(collection="nowhere"), "not_found", 404, "nowhere"),
    ],
)
def test_every_refusal_is_one_exception_with_the_servers_code(
    corpus: Corpus, options: QueryOptions, code: str, status: int, words: str
) -> None:
    retriever = of_llamaindex.OpenFableRetriever(
        base_url=corpus.url,
        token=corpus.key,
        top_k=options.top_k,
        token_budget=options.token_budget,
        collection=options.collection,  # type: ignore[arg-type]
    )
    with pytest.raises(OpenFableError) as refused:
        retriever.retrieve(QUESTION)
    assert (refused.value.code, refused.value.status) == (code, status) and words in refused.value.message
    with pytest.raises(OpenFableError) as refused_async:
        asyncio.run(OpenFableClient(corpus.url, corpus.key).aquery(QUESTION, options))
    assert refused_async.value.code == code


def test_a_bad_token_and_no_server_are_the_same_exception(corpus: Corpus) -> None:
    with pytest.raises(OpenFableError) as refused:
        of_langchain.OpenFableRetriever(base_url=corpus.url, token="of_wrong").invoke(QUESTION)
    assert refused.value.status == 401 and refused.value.message
    with pytest.raises(OpenFableError) as unreachable:
        of_langchain.OpenFableRetriever(base_url="http://127.0.0.1:9", token=corpus.key).invoke(QUESTION)
    assert unreachable.value.code == "unreachable" and unreachable.value.status == 0


def test_the_client_package_needs_no_django() -> None:
    script = (
        "import sys, openfable_client.langchain, openfable_client.llamaindex\n"
        "assert not [name for name in sys.modules if name.split('.')[0] in "
        "('django', 'openfable', 'documents', 'retrieval', 'api')], 'server modules loaded'\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
