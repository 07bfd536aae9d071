"""The one fake LLM: an OpenAI-compatible HTTP server for tests and ``bench-cost``.

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

It lives here, in the dev-only benchmarks package, because both the tests and the benchmarks use
it: tests may import benchmarks (they test them), benchmarks never import tests, and the layer
check (import-linter) sees every import it makes. Nothing here ships with the product.
"""
