"""Tables of the project layer: the LLM response cache, the API tokens and the workers' heartbeats."""

from __future__ import annotations

from django.conf import settings
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


class ApiToken(models.Model):
    """A person's named key for the REST API and the MCP server (``Authorization: Bearer <key>``).

    Only a hash is stored: the key is shown once, when it is made (``openfable.api_tokens``).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="the key's first characters, to tell keys apart")
    key_hash = models.CharField(max_length=64, unique=True, help_text="sha256 of the key")
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked is None


class WorkerHeartbeat(models.Model):
    """A Celery worker's sign of life, written every OPENFABLE_WORKER_HEARTBEAT_SECONDS by a thread
    of its main process (``openfable.worker_heartbeat``) whether or not its pool is busy.

    The health check reads it when no worker answers a ping in time: a worker whose every slot is
    embedding a long document may answer late, and a fresh heartbeat says it is busy, not dead.
    A worker that stops deletes its row; one that was killed leaves a row that only grows old.
    """

    name = models.CharField(max_length=255, unique=True, help_text="host:pid of the worker's main process")
    hostname = models.CharField(max_length=255)
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField(db_index=True)
    active_tasks = models.PositiveIntegerField(default=0, help_text="tasks running at the last beat")

    class Meta:
        ordering = ["-beat_at"]

    def __str__(self) -> str:
        return self.name
