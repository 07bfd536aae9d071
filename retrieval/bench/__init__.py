"""Retrieval benchmarks: ``manage.py openfable bench-retrieval`` and ``bench-latency``.

- ``metrics``: RAGEval's recall and EIR (pure, no Django).
- ``baselines``: flat 128-token chunk baselines (BM25 through bm25s, dense through the configured
  embedder) and the budget packing they share.
- ``retrieval_bench``: the recall / EIR harness over DragonBall-format JSONL files.
- ``latency_bench``: ``vector`` mode latency on a synthetic corpus against a bare pgvector query.
"""
