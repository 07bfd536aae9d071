"""An index of the documents a query can search (their root, not excluded): the lexical path's
scope reads it alone instead of fetching a wide node row per document. Built CONCURRENTLY
(the migration is not atomic), so the app keeps serving while it builds."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("documents", "0011_collection_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="node",
            index=models.Index(
                condition=models.Q(("excluded", False), ("kind", "root")),
                fields=["document"],
                name="node_searchable_root",
            ),
        ),
    ]
