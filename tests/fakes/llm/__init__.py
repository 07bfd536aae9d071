"""The one fake LLM: an OpenAI-compatible HTTP server for the tests and ``bench-cost``.

The product's real client stack (litellm -> openai SDK -> httpx) talks to it over HTTP, so
retries, timeouts, usage accounting and JSON parsing run as they do against a hosted model.

- ``server``: ``ScriptedOpenAIServer``, the wire protocol (chat completions, embeddings, models)
  answering from per-endpoint scripts: a reply, an HTTP status, a delay, or a callable of the
  request; llama-cpp-python's refusal of ``json_schema`` on request;
- ``reading``: what a request asks (its schema, the fenced document, the numbered chunks, ...),
  read with the prompt templates of ``documents.ingestion.prompts``;
- ``answers``: what a competent model answers to each OpenFable prompt (``answer``), and simpler
  valid answers tests build on;
- ``model``: ``FableModelServer``, the server answering every prompt with ``answer`` and counting
  tokens as OpenAI bills them (what ``bench-cost`` measures against).

It lives with the tests, which use it most; the benchmarks (``bench-cost``) import it from here.
The product's tests never import the benchmarks (an import-linter contract in pyproject.toml),
so they run the same without them. Nothing here ships with the product.
"""
