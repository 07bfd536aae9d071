"""The lexical index's statistics, kept instead of counted per query: the documents a query can
search with their lengths (``SearchableDocument``), each collection's count and total length of
them, and its term dictionary (``CollectionTerm``), filled here from the trees and postings stored.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0018_agent_state"),
    ]

    operations = [
        migrations.CreateModel(
            name="CollectionSearchStats",
            fields=[
                (
                    "collection",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="search_stats",
                        serialize=False,
                        to="documents.collection",
                    ),
                ),
                ("documents", models.IntegerField(default=0)),
                ("tokens", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name="SearchableDocument",
            fields=[
                (
                    "document",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="searchable",
                        serialize=False,
                        to="documents.document",
                    ),
                ),
                ("length", models.PositiveIntegerField(help_text="the document's token count")),
                (
                    "collection",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="documents.collection",
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="CollectionTerm",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("term", models.TextField(help_text="a lexeme as the search configuration stems it")),
                (
                    "documents",
                    models.IntegerField(help_text="searchable documents of the collection holding the term"),
                ),
                (
                    "collection",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="terms",
                        to="documents.collection",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("term", "collection"), include=("documents",), name="collection_term_unique"
                    )
                ],
            },
        ),
        migrations.RunSQL(
            [
                # Searchable: a root not excluded from retrieval (what a query's scope required).
                "INSERT INTO documents_searchabledocument (document_id, collection_id, length) "
                "SELECT d.id, d.collection_id, d.token_count FROM documents_document d WHERE EXISTS ("
                " SELECT 1 FROM documents_node n WHERE n.document_id = d.id AND n.kind = 'root' AND NOT n.excluded)",
                "INSERT INTO documents_collectionsearchstats (collection_id, documents, tokens) "
                "SELECT collection_id, count(*), sum(length) FROM documents_searchabledocument GROUP BY collection_id",
                "INSERT INTO documents_collectionterm (collection_id, term, documents) "
                "SELECT d.collection_id, t.term, count(*) FROM documents_documentterm t "
                "JOIN documents_document d ON d.id = t.document_id GROUP BY d.collection_id, t.term",
            ],
            migrations.RunSQL.noop,
        ),
    ]
