"""Typed factory-boy factories for the corpus models."""

from __future__ import annotations

import hashlib

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from documents.models import Collection, Document, IngestionJob, Node


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.test")


class CollectionFactory(factory.django.DjangoModelFactory[Collection]):
    class Meta:
        model = Collection

    name = factory.Sequence(lambda n: f"Collection {n}")
    slug = factory.Sequence(lambda n: f"collection-{n}")


class DocumentFactory(factory.django.DjangoModelFactory[Document]):
    class Meta:
        model = Document

    collection = factory.SubFactory(CollectionFactory)
    title = factory.Sequence(lambda n: f"Document {n}")
    content = factory.Sequence(lambda n: f"Paragraph one of document {n}.\nParagraph two.")
    content_hash = factory.LazyAttribute(lambda doc: hashlib.sha256(doc.content.encode()).hexdigest())


class NodeFactory(factory.django.DjangoModelFactory[Node]):
    class Meta:
        model = Node

    document = factory.SubFactory(DocumentFactory)
    kind = Node.Kind.ROOT
    depth = 0
    ordinal = 0
    order = factory.Sequence(lambda n: n)
    title = "Root"
    start_char = 0
    end_char = 10


class IngestionJobFactory(factory.django.DjangoModelFactory[IngestionJob]):
    class Meta:
        model = IngestionJob

    document = factory.SubFactory(DocumentFactory)
