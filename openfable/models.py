"""Tables of the project layer: the LLM response cache."""

from __future__ import annotations

from django.db import models


class LLMCacheEntry(models.Model):
    """One LLM answer, keyed by ``openfable.llm.LLMClient.cache_key`` (model, messages, schema).

    Shared by web and workers and kept across restarts, so re-indexing unchanged text costs
    nothing. Entries never expire: a key names everything that shaped the answer, so an entry
    is either asked for again or never; deleting rows (all, or the oldest by ``created_at``)
    is always safe and only costs calls.
    """

    key = models.CharField(max_length=128, primary_key=True)
    # {"data": the parsed JSON, "text": the raw assistant message}. jsonb does not keep the
    # order of object keys; nothing reads the answer by position.
    value = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)  # when this answer was (last) stored

    class Meta:
        verbose_name = "LLM cache entry"
        verbose_name_plural = "LLM cache entries"

    def __str__(self) -> str:
        return self.key
