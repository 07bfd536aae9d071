"""Signal receivers: guards for writes that reach the models without a service."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models.signals import pre_delete
from django.dispatch import receiver

from documents.services.users import user_collections_hand_over


@receiver(pre_delete, sender=settings.AUTH_USER_MODEL)
def _user_collections_hand_over(sender: Any, instance: Any, **kwargs: Any) -> None:
    # ``user.delete()`` and ``User.objects.filter(…).delete()`` (``manage.py shell``, another app)
    # skip ``users_delete``; without this their collections would be set ownerless as they are,
    # and a second ownerless default fails its constraint (an IntegrityError). Django sends this
    # inside the deletion's transaction, before it sets the collections' owner to NULL.
    user_collections_hand_over(user=instance)
