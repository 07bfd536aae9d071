"""The one seam through which the services hand work to a worker.

The Celery tasks (``documents.tasks``) are a surface over the services, like a view: they import
the services, never the reverse (import-linter forbids it). A service that queues work calls a
sender here, and the tasks module plugs its task objects in when it is imported
(``tasks_connect``), which every process does as Django starts (``DocumentsConfig.ready``) and the
worker again through its autodiscovery. Nothing is queued by a string name: the task objects
themselves are handed over, so renaming one still fails the checks, not a run.

The senders send at once; a caller queues them with ``transaction.on_commit`` (a job's task,
``job_queue.job_send``; a re-embedding, ``trees.queue_embedding``), so that the worker never reads
a row that is not committed yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class _Task(Protocol):
    def delay(self, *args: Any, **kwargs: Any) -> Any: ...


@dataclass(frozen=True)
class BackgroundTasks:
    ingest_document: _Task  # runs the document's newest unfinished job (takes its id)
    embed_nodes: _Task  # re-embeds the nodes whose embedded text a person changed (takes their ids)


_connected: BackgroundTasks | None = None


def tasks_connect(tasks: BackgroundTasks) -> None:
    """Plug the Celery tasks in (``documents.tasks`` does, when it is imported)."""
    global _connected
    _connected = tasks


def _tasks() -> BackgroundTasks:
    if _connected is None:
        raise RuntimeError(
            "no background tasks are connected: documents.tasks was never imported "
            "(DocumentsConfig.ready imports it: is the documents app installed?)"
        )
    return _connected


def ingestion_send(*, document_id: int) -> None:
    """Send the task that runs the document's newest unfinished job (run in place under
    CELERY_TASK_ALWAYS_EAGER); a broker that fails raises (``KombuError``, ``OSError``)."""
    _tasks().ingest_document.delay(document_id)


def embedding_send(*, node_ids: list[int]) -> None:
    """Send the task that re-embeds these nodes."""
    _tasks().embed_nodes.delay(node_ids)
