"""Build the per-collection HNSW indexes of the collections that are already large enough.

New trees build them as they come (documents.services.collection_indexes, after each tree swap);
this builds them once for the corpus that was there before, CONCURRENTLY (outside a transaction:
the migration is not atomic), so the app can keep serving meanwhile. The definition is frozen
here as migrations freeze theirs: the corpus-wide index's (m 16, ef_construction 64, cosine).
"""

from typing import Any

from django.conf import settings
from django.db import migrations


def build(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    minimum = getattr(settings, "RETRIEVAL_COLLECTION_INDEX_MIN_NODES", 2000)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT collection_id FROM documents_node WHERE embedding IS NOT NULL AND collection_id IS NOT NULL "
            "GROUP BY collection_id HAVING count(*) >= %s",
            [minimum],
        )
        due = [row[0] for row in cursor.fetchall()]
        for collection_id in due:
            name = f"node_embedding_hnsw_c{int(collection_id)}"
            cursor.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON documents_node "
                "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64) "
                f"WHERE collection_id = {int(collection_id)}"
            )


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("documents", "0010_node_collection"),
    ]

    operations = [migrations.RunPython(build, migrations.RunPython.noop)]
