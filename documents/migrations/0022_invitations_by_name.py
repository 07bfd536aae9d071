"""Invitations name a person by username (one to a name without an account is kept like any
other), and a declined one is kept for a while instead of deleted."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def _names_from_users(apps, schema_editor):
    Invitation = apps.get_model("documents", "CollectionInvitation")
    for invitation in Invitation.objects.select_related("user").iterator():
        invitation.username = invitation.user.username
        invitation.save(update_fields=["username"])


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0021_document_ocr"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="collectioninvitation",
            name="username",
            field=models.CharField(default="", max_length=150),
            preserve_default=False,
        ),
        migrations.RunPython(_names_from_users, migrations.RunPython.noop),
        migrations.RemoveConstraint(model_name="collectioninvitation", name="collection_invitation_once"),
        migrations.AddConstraint(
            model_name="collectioninvitation",
            constraint=models.UniqueConstraint(
                fields=("collection", "username"), name="collection_invitation_once"
            ),
        ),
        migrations.AlterField(
            model_name="collectioninvitation",
            name="user",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="collection_invitations",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="collectioninvitation",
            name="declined",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="collectioninvitation",
            index=models.Index(fields=["username"], name="invitation_username"),
        ),
    ]
