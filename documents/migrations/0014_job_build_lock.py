"""One unfinished ingestion job per document: a partial unique index on queued and running jobs.

Before, a re-index while a build ran added a second job, and both could run side by side (the
stalled-job sweep failed a large document's live job, then a re-index started another build
beside it). Older duplicates are resolved first: the newest unfinished job of each document
stays, the others are marked failed as superseded.
"""

from django.db import migrations, models
from django.utils import timezone

UNFINISHED = ["queued", "running"]


def fail_superseded(apps, schema_editor):
    IngestionJob = apps.get_model("documents", "IngestionJob")
    newest: set[int] = set()
    superseded = []
    for job in IngestionJob.objects.filter(status__in=UNFINISHED).order_by("document_id", "-created", "-id"):
        if job.document_id in newest:
            superseded.append(job.pk)
        newest.add(job.document_id)
    IngestionJob.objects.filter(pk__in=superseded).update(
        status="failed",
        error="Superseded by a newer ingestion of the same document.",
        finished=timezone.now(),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0013_collection_is_default"),
    ]

    operations = [
        migrations.RunPython(fail_superseded, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="ingestionjob",
            constraint=models.UniqueConstraint(
                condition=models.Q(("status__in", ["queued", "running"])),
                fields=("document",),
                name="job_one_unfinished_per_document",
            ),
        ),
    ]
