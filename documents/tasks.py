"""Celery tasks: thin shells around documents.indexing."""

from __future__ import annotations

import logging

from celery import Task, shared_task
from django.db import InterfaceError, OperationalError

from documents.indexing import claim_job, document_index, job_fail
from openfable.embeddings import EmbeddingDimensionError, EmbeddingError

logger = logging.getLogger(__name__)

# Failures worth retrying: the database or the embedding service briefly away.
TRANSIENT_ERRORS = (OperationalError, InterfaceError, EmbeddingError)
MAX_RETRIES = 3


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def ingest_document(self: Task, document_id: int) -> None:
    """Index the document's newest unfinished job. Safe to run twice: the tree is replaced, never appended."""
    job = claim_job(document_id=document_id)
    if job is None:
        logger.info("document %s: no unfinished ingestion job (deleted or already done)", document_id)
        return
    try:
        document_index(job=job)
    except EmbeddingDimensionError as error:
        job_fail(job=job, error=str(error))
    except TRANSIENT_ERRORS as error:
        if self.request.retries >= MAX_RETRIES:
            job_fail(job=job, error=f"Gave up after {MAX_RETRIES} retries: {error}")
            return
        logger.warning("document %s: transient failure, retrying: %s", document_id, error)
        raise self.retry(exc=error, countdown=2 ** (self.request.retries + 1)) from error
    except Exception as error:  # anything else is recorded on the job, never lost
        logger.exception("document %s: ingestion failed", document_id)
        job_fail(job=job, error=f"{type(error).__name__}: {error}")
