"""A default collection is bound to its owner (``is_default``), no longer found by its slug.

Before, the default collection of user N was whichever collection had the slug "default-N", so
another user who made that slug first received N's uploads. Existing defaults are kept where
the slug and the owner agree ("default-N" owned by N, ownerless "default"); a look-alike owned by
someone else stays an ordinary collection of theirs, and N gets a new default on first use.
"""

from django.db import migrations, models


def mark_defaults(apps, schema_editor):
    Collection = apps.get_model("documents", "Collection")
    Collection.objects.filter(slug="default", owner__isnull=True).update(is_default=True)
    for collection in Collection.objects.filter(slug__startswith="default-", owner__isnull=False):
        if collection.slug == f"default-{collection.owner_id}":
            Collection.objects.filter(pk=collection.pk).update(is_default=True)


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0012_node_searchable_root"),
    ]

    operations = [
        migrations.AddField(
            model_name="collection",
            name="is_default",
            field=models.BooleanField(default=False, editable=False),
        ),
        migrations.RunPython(mark_defaults, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="collection",
            constraint=models.UniqueConstraint(
                condition=models.Q(("is_default", True)),
                fields=("owner",),
                name="collection_one_default_per_owner",
                nulls_distinct=False,
            ),
        ),
    ]
