"""The benchmarks: ``python -m fable_benchmarks bench-ingest``, ``bench-retrieval``, ``bench-latency``, ``bench-cost``
and ``bench-load``.

The layer above every surface: they use the corpus only through the public services and
selectors (``documents.services``, ``documents.selectors``, ``retrieval.services``), exactly as
a surface would, so what they measure is what a user gets.

- ``datasets``: DragonBall-format JSONL files (documents and queries); pure, no Django.
- ``metrics``: RAGEval's recall and EIR; pure.
- ``baselines``: flat 128-token chunk baselines (BM25 through bm25s, dense through the configured
  embedder) and the budget packing they share.
- ``ingest``: indexing time of the pipeline against bare embedding of the same texts.
- ``retrieval``: the recall / EIR harness (engine modes, baselines, ceiling and oracle).
- ``latency``: ``vector`` mode latency on a synthetic corpus against a bare pgvector query.
- ``corpus_latency``: ``vector`` mode latency on ingested datasets, every collection loaded and
  each query filtered to its own.
- ``cost``: LLM tokens of ingestion, re-indexing and queries, against the tests' fake model
  (``tests.fakes.llm``): a scripted model that speaks OpenAI's chat-completions protocol over HTTP.
- ``load``: concurrent API and UI users (locust, ``locustfile``) against the servers of
  ``load_servers`` (gunicorn + uvicorn workers, a Celery worker ingesting meanwhile).
- ``extraction``: PDF extraction candidates on real PDFs (``bench-extract``): extraction
  ceiling against the gold references, pages per second, peak memory, each in its own process.
- ``structure``: how well trees follow real headings (``bench-structure``): the measures;
  ``structure_run`` runs the documents through extraction and the structural builder,
  ``structure_documents`` makes Markdown, HTML, Word and bookmarked PDFs with known headings,
  ``structure_report`` adds the scores up per format.
- ``report``: the markdown tables and the JSON file the five write.
- ``plot``: recall against token budget as an SVG chart, from bench-retrieval's report.
- ``cli``: the subcommands; ``command``: the command that runs them (``__main__``).
"""

from __future__ import annotations

from openfable.errors import UserInputError


class BenchInputError(UserInputError):
    """Benchmark input the user can fix (a missing file, an unknown collection, a bad dataset line)."""
