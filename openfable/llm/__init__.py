"""The one client for LLM calls: structured JSON completions through litellm.

Everything an LLM step needs goes through :class:`LLMClient`: one place for the model name, the
timeout, retries (our own loop, see ``openfable.retry``), a bound on concurrent calls, a response
cache and cost accounting. Callers send messages plus a JSON schema and get parsed JSON back, or
an :class:`LLMError` subclass they can catch to fall back to the non-LLM path. :class:`LLMUsage`
is the one record of calls, tokens and cost that every LLM step (indexing and retrieval) sums.

The default response cache is :class:`DatabaseLLMCache`, one row per answer in
``openfable.models.LLMCacheEntry`` (a table ``migrate`` makes).

Servers as people run them (``openfable.llm_endpoints``): a server that refuses ``json_schema``
structured output (llama-cpp-python does, with an HTTP 500) is asked again at once with
``json_object`` and the schema in the prompt; that is learned once per model and base URL, kept
for the process and stored beside the cached answers, so web and workers share it. Errors that a
retry cannot heal are not retried. After ``breaker_threshold`` failed requests in a row (whoever
made them) the endpoint cools down for ``cooldown_s``. A client made with ``respect_cooldown``
(retrieval's: a query has the vector paths to fall back on at once) then raises
:class:`LLMCoolingDownError` without a request, and its first call after the cool-down is one
trial request; other clients (ingestion, summary regeneration: a person is waiting for a tree or a
summary, and a fallback there lasts) still try, and their success ends the cool-down for all.

litellm is imported lazily and model names get the provider prefix litellm needs
(``openfable.llm.litellm_setup``).

The modules, each imported through this package (``from openfable.llm import LLMClient``):

- ``client``: :class:`LLMClient`, the calls, retries, the response formats and the cool-down;
- ``config``: :class:`LLMConfig` and ``llm_configured`` (do the settings name a model);
- ``calls``: :class:`LLMRequest`, :class:`LLMResult` and :class:`LLMUsage`;
- ``errors``: :class:`LLMError` and the ways a call fails;
- ``cache``: the answer cache (:class:`DatabaseLLMCache`, or anything :class:`CacheLike`);
- ``json_output``: ``parse_json_output``, a model's JSON answer parsed;
- ``fallbacks``: the tally of fallbacks by kind (:class:`Fallback`, ``fallback_counts``);
- ``model_text``: titles and summaries cut clean of leaked chat-template tokens;
- ``litellm_setup``: ``import_litellm`` (once, offline) and ``litellm_model_name``.
"""

from __future__ import annotations

from openfable.llm.cache import CacheLike, DatabaseLLMCache
from openfable.llm.calls import LLMRequest, LLMResult, LLMUsage
from openfable.llm.client import LLMClient
from openfable.llm.config import LLMConfig, llm_configured
from openfable.llm.errors import (
    LLMCoolingDownError,
    LLMError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailableError,
)
from openfable.llm.fallbacks import Fallback, count_fallback, counts_since, fallback_counts
from openfable.llm.json_output import parse_json_output
from openfable.llm.litellm_setup import import_litellm, litellm_model_name

__all__ = [
    "CacheLike",
    "DatabaseLLMCache",
    "Fallback",
    "LLMClient",
    "LLMConfig",
    "LLMCoolingDownError",
    "LLMError",
    "LLMOutputError",
    "LLMRequest",
    "LLMRequestError",
    "LLMResult",
    "LLMUnavailableError",
    "LLMUsage",
    "count_fallback",
    "counts_since",
    "fallback_counts",
    "import_litellm",
    "litellm_model_name",
    "llm_configured",
    "parse_json_output",
]
