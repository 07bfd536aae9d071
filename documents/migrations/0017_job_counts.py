from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0016_document_original"),
    ]

    operations = [
        migrations.AddField(
            model_name="ingestionjob",
            name="stage_done",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="ingestionjob",
            name="stage_total",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="ingestionjob",
            name="stage_started",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
